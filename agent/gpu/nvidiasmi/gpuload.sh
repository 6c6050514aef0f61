#!/bin/sh
# gpu-load, simulated by skiff (agent/gpu/nvidiasmi): a CUDA workload that
# holds SM load and memory on every GPU device of this container.
RECORDS=%s
LOAD_ROOT=%s
usage() { echo 'usage: gpu-load --util PERCENT [--mem MiB] [--seconds N]' >&2; exit 2; }
isnum() { case "$1" in ''|*[!0-9]*|?????????*) return 1 ;; esac; return 0; }
util='' mem=0 secs=''
while [ $# -gt 0 ]; do
	case "$1" in
	--util) shift; util=${1:-} ;;
	--util=*) util=${1#--util=} ;;
	--mem) shift; mem=${1:-} ;;
	--mem=*) mem=${1#--mem=} ;;
	--seconds) shift; secs=${1:-} ;;
	--seconds=*) secs=${1#--seconds=} ;;
	-h|--help) usage ;;
	*) echo "gpu-load: unknown argument '$1'" >&2; usage ;;
	esac
	shift
done
{ isnum "$util" && [ "$util" -le 100 ]; } || { echo "gpu-load: --util must be a percentage (0-100), not '$util'" >&2; exit 2; }
isnum "$mem" || { echo "gpu-load: --mem must be a number of MiB, not '$mem'" >&2; exit 2; }
[ -z "$secs" ] || isnum "$secs" || { echo "gpu-load: --seconds must be a whole number, not '$secs'" >&2; exit 2; }

links='' sleeper='' held=0
cleanup() {
	[ -z "$sleeper" ] || kill "$sleeper" 2>/dev/null
	for l in $links; do rm -f "$l.load" "$l.fifo"; done
	links=''
}
trap 'cleanup; exit 143' TERM
trap 'cleanup; exit 130' INT
trap cleanup EXIT

# lock DIR: the domain's allocation lock (agent/gpu/usage.LockName).
lock() {
	tries=0
	until mkdir "$1/%s" 2>/dev/null; do
		tries=$((tries + 1))
		if [ "$tries" -gt 50 ]; then rmdir "$1/%s" 2>/dev/null; tries=0; fi # left by a killed gpu-load
		sleep 0.1 2>/dev/null || sleep 1
	done
}
unlock() { rmdir "$1/%s" 2>/dev/null; }

# pinned N: CUDA_MPS_PINNED_DEVICE_MEM_LIMIT's MiB for device N ("0=4096M,1=2G"), or empty.
pinned() {
	pv='' oldifs=$IFS
	IFS=,
	for e in ${CUDA_MPS_PINNED_DEVICE_MEM_LIMIT:-}; do
		case "$e" in "$1="*) ;; *) continue ;; esac
		v=${e#*=}
		case "$v" in
		*[Mm]) v=${v%%?}; isnum "$v" && pv=$v ;;
		*[Gg]) v=${v%%?}; isnum "$v" && pv=$((v * 1024)) ;;
		*) isnum "$v" && pv=$((v / 1048576)) ;;
		esac
	done
	IFS=$oldifs
}

token="$(cat /proc/sys/kernel/random/uuid 2>/dev/null || echo "$$-$(date +%%s)")"
n=0 first=''
for rec in "$RECORDS"/gpu-*.env; do
	[ -f "$rec" ] || continue
	SUB_ID='' SUB_DOMAIN='' SUB_KIND='' MIG_UUID=''
	. "$rec" # the driver's record, mounted read-only
	if [ -z "$SUB_ID" ]; then n=$((n + 1)); continue; fi
	dir="$LOAD_ROOT/$SUB_DOMAIN"
	limit=$SUB_MEM sm=$SUB_SM
	if isnum "${CUDA_MPS_ACTIVE_THREAD_PERCENTAGE:-}" && [ "$CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" -lt "$sm" ]; then
		sm=$CUDA_MPS_ACTIVE_THREAD_PERCENTAGE
	fi
	pinned "$n"
	if [ -n "$pv" ] && [ "$pv" -lt "$limit" ]; then limit=$pv; fi
	# A HAMi slice: HAMi-core's limits (CUDA_DEVICE_MEMORY_LIMIT_<n>=<MiB>m).
	eval "hl=\${CUDA_DEVICE_MEMORY_LIMIT_$n:-}"
	hl=${hl%%m}
	if isnum "$hl" && [ "$hl" -lt "$limit" ]; then limit=$hl; fi
	if isnum "${CUDA_DEVICE_SM_LIMIT:-}" && [ "$CUDA_DEVICE_SM_LIMIT" -gt 0 ] && [ "$CUDA_DEVICE_SM_LIMIT" -lt "$sm" ]; then
		sm=$CUDA_DEVICE_SM_LIMIT
	fi
	lock "$dir"
	used=0
	for lf in "$dir"/*.load; do
		[ -f "$lf" ] || continue
		while IFS='=' read -r lk lv; do
			[ "$lk" = MEM ] && isnum "$lv" && used=$((used + lv))
		done < "$lf"
	done
	free=$((SUB_DOMAIN_MEM - used))
	[ "$free" -ge 0 ] || free=0
	if [ "$mem" -gt "$limit" ] || [ "$mem" -gt "$free" ]; then
		unlock "$dir"
		echo '%s' >&2
		if [ "$mem" -gt "$limit" ]; then
			echo "gpu-load: cudaMalloc of $mem MiB on device $n ($SUB_ID, $SUB_KIND): the device allows $limit MiB" >&2
		else
			echo "gpu-load: cudaMalloc of $mem MiB on device $n ($SUB_ID, $SUB_KIND): $free MiB free of $SUB_DOMAIN_MEM MiB; others hold $used MiB" >&2
		fi
		exit 1
	fi
	if [ -z "$first" ]; then
		mkfifo -m 600 "$dir/$token.fifo" || { unlock "$dir"; exit 1; }
		[ -p "$dir/$token.fifo" ] || { unlock "$dir"; echo "gpu-load: $dir/$token.fifo vanished" >&2; exit 1; }
		exec 3<>"$dir/$token.fifo" # held while gpu-load lives (agent/gpu/usage)
		first="$dir/$token.fifo"
	elif [ ! -e "$dir/$token.fifo" ]; then
		ln "$first" "$dir/$token.fifo" || { unlock "$dir"; exit 1; }
	fi
	links="$links $dir/$token"
	printf 'DEVICE=%%s\nUTIL=%%d\nMEM=%%d\nSM=%%d\n' "$SUB_ID" "$util" "$mem" "$sm" > "$dir/.$token.tmp"
	mv -f "$dir/.$token.tmp" "$dir/$token.load"
	unlock "$dir"
	got=$util
	[ "$got" -le "$sm" ] || got=$sm
	echo "gpu-load: device $n $SUB_ID ($SUB_KIND): ${got}%% of the SMs, $mem MiB"
	held=$((held + 1)) n=$((n + 1))
done
if [ "$held" -eq 0 ]; then
	echo 'gpu-load: CUDA error: no CUDA-capable device is detected' >&2
	exit 100
fi
if [ -n "$secs" ]; then
	sleep "$secs" 3<&- &
else
	sleep 1000000000 3<&- &
fi
sleeper=$!
wait "$sleeper"
sleeper=''
echo "gpu-load: done"
