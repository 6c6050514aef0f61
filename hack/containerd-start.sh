#!/usr/bin/env bash
# Starts a private containerd for skiff's tests, separate from any system
# containerd: own root, state, socket and config. Prints the socket path.
#
#   SKIFF_CI_DIR     root for data      (default /var/lib/skiff-ci)
#   SKIFF_CI_RUN     root for run state (default /run/skiff-ci)
#   SKIFF_CI_TIMEOUT seconds to wait for the socket to answer (default 30)
#
# Tests then read SKIFF_CONTAINERD_ADDRESS=$SKIFF_CI_RUN/containerd.sock.
# Idempotent: if the containerd of the pid file still answers, it is kept.
set -euo pipefail

data=${SKIFF_CI_DIR:-/var/lib/skiff-ci}
run=${SKIFF_CI_RUN:-/run/skiff-ci}
timeout=${SKIFF_CI_TIMEOUT:-30}
sock=$run/containerd.sock
pidfile=$run/containerd.pid
log=$run/containerd.log
config=$run/containerd.toml

if [[ $(id -u) != 0 ]]; then
  echo "containerd-start: must run as root" >&2
  exit 1
fi
for bin in containerd ctr runc; do
  if ! command -v "$bin" >/dev/null; then
    echo "containerd-start: $bin not found; run hack/ci-deps.sh" >&2
    exit 1
  fi
done

answers() { ctr --address "$sock" --timeout 2s version >/dev/null 2>&1; }

if [[ -f $pidfile ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null && answers; then
  echo "containerd-start: already running (pid $(cat "$pidfile")) on $sock"
  echo "$sock"
  exit 0
fi

mkdir -p "$data/containerd" "$data/opt" "$run/containerd"
# CRI is disabled: skiff talks to containerd's own API and sets up networking
# itself, and CRI would otherwise want CNI config and a sandbox image.
cat >"$config" <<TOML
version = 2
root = "$data/containerd"
state = "$run/containerd"
disabled_plugins = ["io.containerd.grpc.v1.cri"]

[grpc]
  address = "$sock"

[ttrpc]
  address = "$sock.ttrpc"

[debug]
  address = ""
  level = "info"

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "$data/opt"
TOML

rm -f "$sock" "$sock.ttrpc"
nohup containerd --config "$config" >"$log" 2>&1 &
echo $! >"$pidfile"

deadline=$((SECONDS + timeout))
until answers; do
  if ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    echo "containerd-start: containerd exited; last lines of $log:" >&2
    tail -n 30 "$log" >&2
    exit 1
  fi
  if ((SECONDS >= deadline)); then
    echo "containerd-start: $sock did not answer within ${timeout}s; last lines of $log:" >&2
    tail -n 30 "$log" >&2
    exit 1
  fi
  sleep 0.1
done
echo "containerd-start: running (pid $(cat "$pidfile")), log $log"
echo "$sock"
