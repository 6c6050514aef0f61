#!/usr/bin/env bash
# Runs skiff's measurements and prints their tables (docs/performance.md
# says what each one means). The Agent part needs root and the private
# containerd (hack/containerd-start.sh); without them it is skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

f=$(mktemp)
echo "== fsync latency (200 × 4 KiB, oflag=dsync)"
dd if=/dev/zero of="$f" bs=4k count=200 oflag=dsync 2>&1 | tail -1
rm -f "$f"

echo "== Store"
go test -run xxx -bench . -benchtime 2000x ./controlplane/store/

echo "== Startup (skiff up --runtime fake, 5 runs)"
bin=$(mktemp -d)/skiff
go build -o "$bin" .
for i in 1 2 3 4 5; do
  home=$(mktemp -d)
  port=$((20000 + RANDOM % 20000))
  out=$home/out
  HOME=$home "$bin" up --runtime fake --no-gossip --data-dir "$home/data" --listen "127.0.0.1:$port" >"$out" 2>&1 &
  pid=$!
  for _ in $(seq 100); do grep -q "is Ready" "$out" && break; sleep 0.1; done
  grep -m1 "is Ready" "$out" || { echo "run $i: no Ready node"; cat "$out"; }
  kill -INT "$pid"; wait "$pid" || true
  rm -rf "$home"
done

echo "== API, Gossip, Agent"
export SKIFF_BENCH=1
if [[ $(id -u) == 0 ]] && [[ -S ${SKIFF_CONTAINERD_ADDRESS:=/run/skiff-ci/containerd.sock} ]]; then
  export SKIFF_CONTAINERD_ADDRESS
else
  unset SKIFF_CONTAINERD_ADDRESS
  echo "(no root or no containerd: the Agent measurement is skipped)"
fi
go test -count=1 -timeout 15m -run 'TestBench(API|Gossip|Agent)' -v ./integration/ | grep -v '^time='
