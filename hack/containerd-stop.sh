#!/usr/bin/env bash
# Stops the containerd that hack/containerd-start.sh started, kills the shims
# of its containers, and unmounts what they left under its root and state.
# Safe to run twice, and when nothing is running.
set -uo pipefail

data=${SKIFF_CI_DIR:-/var/lib/skiff-ci}
run=${SKIFF_CI_RUN:-/run/skiff-ci}
timeout=${SKIFF_CI_TIMEOUT:-30}
sock=$run/containerd.sock
pidfile=$run/containerd.pid

# Shims outlive containerd by design; find ours by the address they were given.
shims=$(pgrep -f -- "-address $sock( |$)" || true)

if [[ -f $pidfile ]]; then
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    deadline=$((SECONDS + timeout))
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile"
fi

for pid in $shims; do
  # Kill the shim's children (container processes) first, then the shim.
  pkill -KILL -P "$pid" 2>/dev/null || true
  kill -KILL "$pid" 2>/dev/null || true
done

# Unmount leftovers (rootfs overlays, shm, bind mounts), deepest first.
grep -E " ($data|$run)/" /proc/self/mounts | awk '{print $2}' | sort -r | while read -r m; do
  umount -l "$m" 2>/dev/null || true
done
rm -f "$sock" "$sock.ttrpc"
echo "containerd-stop: stopped"
