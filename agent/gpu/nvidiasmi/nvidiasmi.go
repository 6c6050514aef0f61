// Package nvidiasmi writes a simulated nvidia-smi: a small POSIX sh script
// (it runs under busybox sh and dash) that prints what the real tool prints
// for the GPUs a container was given. Inside a container of a simulated
// node, `nvidia-smi` then shows exactly the allocated GPUs, renumbered from 0
// the way the real tool numbers them inside a container, and says in its
// first line that they are simulated.
//
// The script knows its GPUs from records, one per GPU: lines of sh
// variables (GPU_NAME=..., GPU_LINK_3=NV12, ...) written by [Record]. Two
// forms:
//
//   - [Script]: the records are inside the script; one script per set of GPUs.
//   - [DirScript]: the records are files in a directory, one per GPU
//     (gpu-03.env for host GPU 3), read when the script runs. The CDI spec of
//     a simulated node mounts one file per allocated device into that
//     directory, so one script shows any allocation (see agent/gpu/cdi).
//
// Supported: the default table, -L, topo -m, --query-gpu=FIELDS
// --format=csv[,noheader][,nounits] with the fields index, name, uuid,
// memory.total, memory.used, memory.free, pci.bus_id, driver_version,
// temperature.gpu, utilization.gpu, power.draw, power.limit, compute_cap,
// count.
package nvidiasmi

import (
	"fmt"
	"sort"
	"strings"

	"skiff.dev/skiff/agent/gpu"
	"skiff.dev/skiff/agent/gpu/usage"
	"skiff.dev/skiff/api"
	"skiff.dev/skiff/api/gputopology"
)

// Banner is the first line of every output but csv and -L, which scripts
// parse: the GPUs are not real.
const Banner = "skiff simulated GPU: these GPUs are simulated by skiff; nvidia-smi is a script"

// RecordName is the file name of host GPU index's record in a DirScript
// directory. Zero-padded so that the shell's sorted glob keeps host order.
func RecordName(index int) string { return fmt.Sprintf("gpu-%02d.env", index) }

// Record is the sh record of one GPU: its facts, idle sensor values (the
// script adds what the loads of its domain draw, see agent/gpu/usage), and
// its links to the other GPUs of the host (GPU_LINK_<host index>). driver
// and cuda, when not empty, replace the device's versions.
func Record(d gpu.Device, topo *gputopology.Topology, driver, cuda string) []byte {
	return record(d, nil, topo, driver, cuda)
}

// SubRecord is the record of one device of a GPU (a whole GPU, a
// replica, an MPS share, a MIG device): the GPU's record plus what the
// device is (SUB_*), which gpu-load reads for its limits and its load
// directory, and nvidia-smi for its live values.
func SubRecord(d gpu.Device, sd gpu.SubDevice, topo *gputopology.Topology) []byte {
	return record(d, &sd, topo, "", "")
}

// SubRecordName is the file name of a device's record: the GPU's
// (RecordName) for a whole GPU; gpu-03-r002.env for replica 2 of host GPU
// 3; gpu-03-mig1.env for its MIG device 1.
func SubRecordName(sd gpu.SubDevice) string {
	switch {
	case sd.MIG != nil:
		return fmt.Sprintf("gpu-%02d-mig%d.env", sd.ParentIndex, sd.MIG.Index)
	case sd.Sharing == gpu.SharingTimeSlicing || sd.Sharing == gpu.SharingMPS:
		return fmt.Sprintf("gpu-%02d-r%03d.env", sd.ParentIndex, sd.Replica)
	}
	return RecordName(sd.ParentIndex)
}

func record(d gpu.Device, sd *gpu.SubDevice, topo *gputopology.Topology, driver, cuda string) []byte {
	if driver == "" {
		driver = d.DriverVersion
	}
	if cuda == "" {
		cuda = d.CUDAVersion
	}
	powerCap := usage.PowerLimitW(d.Name)
	vars := [][2]string{
		{"GPU_INDEX", fmt.Sprint(d.Index)},
		{"GPU_NAME", d.Name},
		{"GPU_UUID", d.UUID},
		{"GPU_BUS", d.PCIBusID},
		{"GPU_MEM_TOTAL", fmt.Sprint(d.MemoryMiB)},
		{"GPU_MEM_USED", fmt.Sprint(d.MemoryMiB - min(d.FreeMiB, d.MemoryMiB))},
		{"GPU_TEMP", fmt.Sprint(usage.TemperatureC(d.Index, 0))}, // idle, a little different per GPU
		{"GPU_POWER", fmt.Sprint(usage.PowerW(powerCap, 0))},
		{"GPU_POWER_CAP", fmt.Sprint(powerCap)},
		{"GPU_UTIL", "0"},
		{"GPU_CC", fmt.Sprintf("%d.%d", d.ComputeMajor, d.ComputeMinor)},
		{"GPU_NUMA", numa(d.NUMANode)},
		{"GPU_CPUS", orNA(d.CPUAffinity)},
		{"GPU_DRIVER", driver},
		{"GPU_CUDA", cuda},
	}
	for j := 0; j < topo.N(); j++ {
		if j != d.Index {
			vars = append(vars, [2]string{fmt.Sprintf("GPU_LINK_%d", j), topo.Link(d.Index, j).String()})
		}
	}
	if sd != nil {
		vars = append(vars, subVars(*sd)...)
	}
	var b strings.Builder
	for _, v := range vars {
		fmt.Fprintf(&b, "%s=%s\n", v[0], quote(v[1]))
	}
	return []byte(b.String())
}

// Script is a self-contained nvidia-smi for the given GPUs (host numbering
// in Device.Index, matrix topo of the host), shown as GPU 0..n-1.
func Script(gpus []gpu.Device, topo *gputopology.Topology, driver, cuda string) []byte {
	sorted := append([]gpu.Device(nil), gpus...)
	sort.Slice(sorted, func(a, b int) bool { return sorted[a].Index < sorted[b].Index })
	var b strings.Builder
	b.WriteString(header)
	for k, d := range sorted {
		fmt.Fprintf(&b, "rec_%d() {\n%s}\n", k, Record(d, topo, driver, cuda))
	}
	fmt.Fprintf(&b, "LOAD_ROOT=''\nSKIFF_N=%d\nload() { rec_$1; live; }\n", len(sorted))
	b.WriteString(liveFn)
	b.WriteString(body)
	return []byte(b.String())
}

// DirScript is an nvidia-smi that shows the GPUs whose records (RecordName,
// SubRecordName) are in dir when it runs, with the live loads it finds
// under loadRoot (agent/gpu/usage; "" for none).
func DirScript(dir, loadRoot string) []byte {
	return []byte(header + fmt.Sprintf(`LOAD_ROOT=%s
SKIFF_N=0
for f in %s/gpu-*.env; do
	[ -f "$f" ] || continue
	eval "F_$SKIFF_N=\$f"
	SKIFF_N=$((SKIFF_N + 1))
done
load() { unset SUB_ID SUB_KIND SUB_DOMAIN MIG_UUID; eval ". \"\$F_$1\""; live; hami "$1"; }
`, quote(loadRoot), quote(dir)) + liveFn + hamiFn + body)
}

// subVars are a device's SUB_* (and MIG_*) record variables.
func subVars(sd gpu.SubDevice) [][2]string {
	vars := [][2]string{
		{"SUB_ID", sd.ID},
		{"SUB_KIND", string(sd.Sharing)},
		{"SUB_MEM", fmt.Sprint(sd.MemoryMiB)},
		{"SUB_SM", fmt.Sprint(sd.SMPercent)},
		{"SUB_DOMAIN", sd.Domain},
		{"SUB_DOMAIN_MEM", fmt.Sprint(sd.DomainMiB)},
	}
	if m := sd.MIG; m != nil {
		vars = append(vars, [][2]string{
			{"MIG_UUID", m.UUID}, {"MIG_PROFILE", m.Profile}, {"MIG_INDEX", fmt.Sprint(m.Index)},
			{"MIG_GI", fmt.Sprint(m.GI)}, {"MIG_CI", fmt.Sprint(m.CI)},
			{"MIG_START", fmt.Sprint(m.Start)}, {"MIG_SIZE", fmt.Sprint(m.Size)},
			{"MIG_SMS", fmt.Sprint(m.SMs)}, {"MIG_SLICES", fmt.Sprint(m.Slices)},
			{"MIG_PROFILE_ID", fmt.Sprint(gpu.MIGProfileID(m.Slices, m.Size))},
		}...)
	}
	return vars
}

func numa(n int) string {
	if n < 0 {
		return "N/A"
	}
	return fmt.Sprint(n)
}

func orNA(s string) string {
	if s == "" {
		return "N/A"
	}
	return s
}

// quote makes s one sh word: 'it'\”s'.
func quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

const header = `#!/bin/sh
# nvidia-smi, simulated by skiff (agent/gpu/nvidiasmi): the GPUs are not real.
# Each GPU is a record of sh variables; load K sets them for GPU K.
`

// liveFn adds to a record what the loads of its device's domain do now,
// with agent/gpu/usage's integer arithmetic (Share, PowerW, TemperatureC):
// utilisation, memory, power, temperature. It reads the records of the
// loads as data (a neighbour on a time-sliced GPU writes them), never as sh.
var liveFn = `
live() {
	DOM_UTIL=0 DOM_USED=0
	[ -n "${SUB_DOMAIN:-}" ] && [ -n "$LOAD_ROOT" ] || return 0
	case $- in *f*) noglob=1 ;; *) noglob=0 ;; esac
	set +f
	for lf in "$LOAD_ROOT/$SUB_DOMAIN"/*.load; do
		[ -f "$lf" ] || continue
		lu=0 lm=0 lc=100
		while IFS='=' read -r lk lv; do
			case "$lv" in ''|*[!0-9]*|?????????*) continue ;; esac
			case "$lk" in UTIL) lu=$lv ;; MEM) lm=$lv ;; SM) lc=$lv ;; esac
		done < "$lf"
		[ "$lu" -gt "$lc" ] && lu=$lc
		DOM_UTIL=$((DOM_UTIL + lu)) DOM_USED=$((DOM_USED + lm))
	done
	[ "$noglob" -eq 0 ] || set -f
	[ "$DOM_UTIL" -gt 100 ] && DOM_UTIL=100
	[ -z "${MIG_UUID:-}" ] || return 0 # a MIG device's numbers are its own (mig_table)
	GPU_UTIL=$DOM_UTIL
	GPU_MEM_USED=$((GPU_MEM_USED + DOM_USED))
	[ "$GPU_MEM_USED" -gt "$GPU_MEM_TOTAL" ] && GPU_MEM_USED=$GPU_MEM_TOTAL
	GPU_POWER=$((GPU_POWER + (GPU_POWER_CAP - GPU_POWER) * GPU_UTIL / 100))
	GPU_TEMP=$((GPU_TEMP + GPU_UTIL * ` + tempRise + ` / 100))
}
`

var tempRise = fmt.Sprint(usage.TempRiseC)

// hamiFn is HAMi-core's view: in a container given a HAMi slice
// (CUDA_DEVICE_MEMORY_LIMIT_<i>=<MiB>m, as HAMi's device plugin sets it),
// the i-th GPU's total memory is the slice's, and what is used is counted
// against it.
var hamiFn = `
hami() {
	eval "hl=\${` + api.HAMiEnvMemoryLimitPrefix + `$1:-}"
	hl=${hl%m}
	case "$hl" in ''|*[!0-9]*) return 0 ;; esac
	GPU_MEM_TOTAL=$hl
	[ "$GPU_MEM_USED" -gt "$GPU_MEM_TOTAL" ] && GPU_MEM_USED=$GPU_MEM_TOTAL
	return 0
}
`

// body is the part of the script that prints; it needs SKIFF_N and load.
// Records of one GPU (two replicas, MIG devices) show the GPU once; its MIG
// devices are listed under it, numbered from 0 as in a container.
const body = `
banner() { echo "` + Banner + `"; }

# gpus sets NG and G_0..: the first record of each distinct GPU, in order.
gpus() {
	NG=0 k=0 seen=' '
	while [ "$k" -lt "$SKIFF_N" ]; do
		load "$k"
		case "$seen" in
		*" $GPU_UUID "*) ;;
		*) seen="$seen$GPU_UUID " ; eval "G_$NG=$k" ; NG=$((NG + 1)) ;;
		esac
		k=$((k + 1))
	done
}

# loadg N loads the record of distinct GPU N.
loadg() { eval "load \$G_$1"; }

# migs UUID CMD: runs CMD M for each MIG record of GPU UUID (M counts from 0),
# with the record loaded.
migs() {
	mu=$1 mm=0 mk=0
	while [ "$mk" -lt "$SKIFF_N" ]; do
		load "$mk"
		if [ "$GPU_UUID" = "$mu" ] && [ -n "${MIG_UUID:-}" ]; then
			"$2" "$mm"
			mm=$((mm + 1))
		fi
		mk=$((mk + 1))
	done
}

mig_row() {
	printf '|%4d %3d %3d %3d  |%19sMiB / %6sMiB  |%3s %6s |%3s %3s %4s %4s %4s |\n' \
		"$cur_gpu" "$MIG_GI" "$MIG_CI" "$1" "$MIG_USED_SHOWN" "$SUB_MEM" "$MIG_SMS" 0 "$MIG_SLICES" 0 0 0 0
	echo '+------------------+----------------------------------+-----------+-----------------------+'
}

mig_line() { printf '  MIG %-11s Device %2d: (UUID: %s)\n' "$MIG_PROFILE" "$1" "$MIG_UUID"; }

table() {
	banner
	date '+%a %b %e %H:%M:%S %Y'
	gpus
	loadg 0
	echo '+-----------------------------------------------------------------------------------------+'
	printf '| NVIDIA-SMI %-22s Driver Version: %-14s CUDA Version: %-9s|\n' "$GPU_DRIVER" "$GPU_DRIVER" "$GPU_CUDA"
	echo '|-----------------------------------------+------------------------+----------------------+'
	echo '| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |'
	echo '| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |'
	echo '|                                         |                        |               MIG M. |'
	echo '|=========================================+========================+======================|'
	k=0 anymig=0
	while [ "$k" -lt "$NG" ]; do
		loadg "$k"
		mig=Disabled ecc=0 util="$GPU_UTIL%"
		if [ -n "${MIG_UUID:-}" ]; then mig=Enabled ecc=On util='N/A' anymig=1; fi
		printf '|%4d  %-29.29s%4s  |%19s %3s |%21s |\n' "$k" "$GPU_NAME" On "$GPU_BUS" Off "$ecc"
		printf '| N/A  %3sC    P0%15sW / %4sW |%8sMiB / %6sMiB |%8s%13s |\n' \
			"$GPU_TEMP" "$GPU_POWER" "$GPU_POWER_CAP" "$GPU_MEM_USED" "$GPU_MEM_TOTAL" "$util" Default
		printf '|%41s|%24s|%21s |\n' '' '' "$mig"
		echo '+-----------------------------------------+------------------------+----------------------+'
		k=$((k + 1))
	done
	if [ "$anymig" -eq 1 ]; then
		echo
		echo '+-----------------------------------------------------------------------------------------+'
		echo '| MIG devices:                                                                            |'
		echo '+------------------+----------------------------------+-----------+-----------------------+'
		echo '| GPU  GI  CI  MIG |                     Memory-Usage |        Vol|        Shared         |'
		echo '|      ID  ID  Dev |                                  | SM     Unc| CE ENC  DEC  OFA  JPG |'
		echo '|==================+==================================+===========+=======================|'
		k=0
		while [ "$k" -lt "$NG" ]; do
			loadg "$k"
			cur_gpu=$k
			migs "$GPU_UUID" mig_row_live
			k=$((k + 1))
		done
	fi
	echo
	echo '+-----------------------------------------------------------------------------------------+'
	echo '| Processes:                                                                              |'
	echo '|  GPU   GI   CI        PID   Type   Process name                              GPU Memory |'
	echo '|        ID   ID                                                               Usage      |'
	echo '|=========================================================================================|'
	echo '|  No running processes found                                                             |'
	echo '+-----------------------------------------------------------------------------------------+'
}

mig_row_live() { MIG_USED_SHOWN=$DOM_USED; mig_row "$1"; }

list() {
	gpus
	k=0
	while [ "$k" -lt "$NG" ]; do
		loadg "$k"
		echo "GPU $k: $GPU_NAME (UUID: $GPU_UUID)"
		migs "$GPU_UUID" mig_line
		k=$((k + 1))
	done
}

lgi_row() {
	printf '|%4d  MIG %-14s %5d %8d %8s:%-5s |\n' "$cur_gpu" "$MIG_PROFILE" "$MIG_PROFILE_ID" "$MIG_GI" "$MIG_START" "$MIG_SIZE"
	found=1
}

# mig -lgi: the GPU instances this container was given.
lgi() {
	gpus
	found=0 k=0
	while [ "$k" -lt "$NG" ]; do
		loadg "$k"
		cur_gpu=$k
		if [ "$found" -eq 0 ] && [ -n "${MIG_UUID:-}" ]; then
			echo '+-------------------------------------------------------+'
			echo '| GPU instances:                                        |'
			echo '| GPU   Name             Profile  Instance   Placement  |'
			echo '|                          ID       ID       Start:Size |'
			echo '|=======================================================|'
		fi
		migs "$GPU_UUID" lgi_row
		k=$((k + 1))
	done
	if [ "$found" -eq 0 ]; then
		echo 'No GPU instances found: Not Found'
		exit 6
	fi
	echo '+-------------------------------------------------------+'
}

topo() {
	banner
	gpus
	k=0
	while [ "$k" -lt "$NG" ]; do
		loadg "$k"
		eval "H_$k=\$GPU_INDEX"
		printf '\tGPU%d' "$k"
		k=$((k + 1))
	done
	printf '\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n'
	k=0
	while [ "$k" -lt "$NG" ]; do
		loadg "$k"
		printf 'GPU%d' "$k"
		m=0
		while [ "$m" -lt "$NG" ]; do
			if [ "$m" -eq "$k" ]; then
				cell=' X '
			else
				eval "h=\$H_$m"
				eval "cell=\${GPU_LINK_$h:-SYS}"
			fi
			printf '\t%s' "$cell"
			m=$((m + 1))
		done
		printf '\t%s\t%s\tN/A\n' "$GPU_CPUS" "$GPU_NUMA"
		k=$((k + 1))
	done
	cat <<'LEGEND'

` + gputopology.Legend + `LEGEND
}

# field NAME UNITS: prints the header (when K is -1) or the value of GPU K.
field() {
	case "$1" in
	index) h=index v=$k ;;
	count) h=count v=$NG ;;
	name) h=name v=$GPU_NAME ;;
	uuid) h=uuid v=$GPU_UUID ;;
	pci.bus_id) h=pci.bus_id v=$GPU_BUS ;;
	driver_version) h=driver_version v=$GPU_DRIVER ;;
	compute_cap) h=compute_cap v=$GPU_CC ;;
	memory.total) h='memory.total [MiB]' v=$GPU_MEM_TOTAL u=' MiB' ;;
	memory.used) h='memory.used [MiB]' v=$GPU_MEM_USED u=' MiB' ;;
	memory.free) h='memory.free [MiB]' v=$((GPU_MEM_TOTAL - GPU_MEM_USED)) u=' MiB' ;;
	temperature.gpu) h=temperature.gpu v=$GPU_TEMP ;;
	utilization.gpu) h='utilization.gpu [%]' v=$GPU_UTIL u=' %' ;;
	power.draw) h='power.draw [W]' v="$GPU_POWER.00" u=' W' ;;
	power.limit) h='power.limit [W]' v="$GPU_POWER_CAP.00" u=' W' ;;
	*) echo "Field \"$1\" is not a valid field to query." >&2; exit 2 ;;
	esac
}

query() {
	fields=$1 format=$2
	case ",$format," in *,csv,*) ;; *) echo 'Only --format=csv is supported by the simulated nvidia-smi.' >&2; exit 2 ;; esac
	noheader=0 nounits=0
	case ",$format," in *,noheader,*) noheader=1 ;; esac
	case ",$format," in *,nounits,*) nounits=1 ;; esac
	gpus
	loadg 0
	set -f
	oldifs=$IFS
	IFS=,
	if [ "$noheader" -eq 0 ]; then
		line='' sep=''
		for f in $fields; do
			u=''
			field "$f"
			line="$line$sep$h" sep=', '
		done
		echo "$line"
	fi
	k=0
	while [ "$k" -lt "$NG" ]; do
		IFS=$oldifs
		loadg "$k"
		IFS=,
		line='' sep=''
		for f in $fields; do
			u=''
			field "$f"
			[ "$nounits" -eq 1 ] && u=''
			line="$line$sep$v$u" sep=', '
		done
		echo "$line"
		k=$((k + 1))
	done
	IFS=$oldifs
}

if [ "$SKIFF_N" -eq 0 ]; then
	echo 'No devices were found'
	exit 6
fi

query_fields='' query_format=''
while [ $# -gt 0 ]; do
	case "$1" in
	-L|--list-gpus) list; exit 0 ;;
	topo) shift; [ "${1:-}" = -m ] || [ "${1:-}" = --matrix ] || { echo 'usage: nvidia-smi topo -m' >&2; exit 2; }; topo; exit 0 ;;
	mig) shift; [ "${1:-}" = -lgi ] || [ "${1:-}" = --list-gpu-instances ] || { echo 'usage: nvidia-smi mig -lgi (simulated nvidia-smi)' >&2; exit 2; }; lgi; exit 0 ;;
	--query-gpu=*) query_fields=${1#--query-gpu=} ;;
	--query-gpu) shift; query_fields=${1:-} ;;
	--format=*) query_format=${1#--format=} ;;
	--format) shift; query_format=${1:-} ;;
	-h|--help) banner; echo 'usage: nvidia-smi [-L | topo -m | mig -lgi | --query-gpu=FIELDS --format=csv[,noheader][,nounits]]'; exit 0 ;;
	*) echo "Invalid combination of input arguments: $1 (simulated nvidia-smi; see nvidia-smi -h)" >&2; exit 2 ;;
	esac
	shift
done
if [ -n "$query_fields" ]; then
	[ -n "$query_format" ] || { echo 'Please specify --format=csv with --query-gpu.' >&2; exit 2; }
	query "$query_fields" "$query_format"
	exit 0
fi
table
`
