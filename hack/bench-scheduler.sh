#!/usr/bin/env bash
# Scheduler throughput, as the issue's Measure section asks (Kubernetes
# scheduler_perf shapes): the real control plane in process, simulated
# nodes, pods created through the in-process client, binds committed to
# the store. Prints a table (CPU/POD: the process's CPU a pod bound;
# KiB/POD: the heap it allocated a pod); results go to docs/performance.md
# by hand.
#
#   hack/bench-scheduler.sh                 # 5000 nodes, 10000 pods, fsync on
#   NODES=500 PODS=1000 hack/bench-scheduler.sh
#   NOSYNC=1 hack/bench-scheduler.sh        # store without fsync
#   GOMAXPROCS=2 hack/bench-scheduler.sh    # the issue's "2 cores"
#   VARIANTS=dra PODS=2000 hack/bench-scheduler.sh   # claims for one GPU each (DRA)
#   hack/bench-ab.sh REF -benches sched    # the same against another commit
set -euo pipefail
cd "$(dirname "$0")/.."
NODES=${NODES:-5000}
PODS=${PODS:-10000}
VARIANTS=${VARIANTS:-"plain gpu unschedulable"}
sync_flag=""
[[ -n "${NOSYNC:-}" ]] && sync_flag="-nosync"
bin=$(mktemp -d)/bench-scheduler
trap 'rm -rf "$(dirname "$bin")"' EXIT
go build -tags benchdra -o "$bin" ./hack/bench-scheduler

anchor() { [[ $1 == unschedulable ]] && echo 600 || echo 680; }
printf '%-14s %6s %6s %5s %5s %9s %8s %9s %8s %8s %7s %8s\n' VARIANT NODES PODS FSYNC PROCS "REGISTER" "PODS/S" "vs ANCHOR" "CPU/POD" "KiB/POD" "RSS" "PEAK"
for v in $VARIANTS; do
	out=$("$bin" -variant "$v" -nodes "$NODES" -pods "$PODS" $sync_flag)
	python3 - "$v" "$(anchor "$v")" "$out" <<'PY'
import json, sys
v, anchor, r = sys.argv[1], float(sys.argv[2]), json.loads(sys.argv[3])
note = " (timed out)" if r.get("timed_out") else ""
print(f'{v:<14} {r["nodes"]:>6} {r["pods"]:>6} {"off" if r["nosync"] else "on":>5} {r["gomaxprocs"]:>5} '
      f'{r["register_s"]:>8.1f}s {r["pods_per_s"]:>8.0f} {r["pods_per_s"]/anchor:>8.2f}x '
      f'{r["cpu_ms_per_pod"]:>6.2f}ms {r["alloc_kib_per_pod"]:>8.1f} '
      f'{r["rss_mib"]:>5.0f}MiB {r["peak_rss_mib"]:>5.0f}MiB{note}')
PY
done
