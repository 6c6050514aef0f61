#!/usr/bin/env bash
# The main job of README.md: a working one-machine cluster with the
# embedded defaults. Installs containerd and runc from the distribution when
# run as root (so pods are real containers), builds skiff into ./bin and runs
# `skiff up`. Without root it still works: pods run on the simulated runtime.
# Extra arguments go to `skiff up` (e.g. --gpus sim:dgxa100).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH

if ! command -v go >/dev/null; then
  echo "error: Go 1.26 or newer is needed to build skiff (https://go.dev/dl)" >&2
  exit 1
fi

if [[ $(id -u) == 0 ]] && ! command -v containerd >/dev/null; then
  echo "== installing containerd and runc (Debian/Ubuntu packages)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq containerd runc >/dev/null
fi
if [[ $(id -u) == 0 ]] && command -v containerd >/dev/null && [[ ! -S /run/containerd/containerd.sock ]]; then
  echo "== starting containerd"
  if command -v systemctl >/dev/null && systemctl start containerd 2>/dev/null; then :; else
    mkdir -p /run/containerd
    nohup containerd >/var/log/skiff-containerd.log 2>&1 &
    for _ in $(seq 1 100); do [[ -S /run/containerd/containerd.sock ]] && break; sleep 0.1; done
  fi
fi

echo "== building skiff"
mkdir -p bin
go build -o bin/skiff .
echo "== bin/skiff up $*   (put bin/ on your PATH to use skiff from other terminals)"
exec ./bin/skiff up "$@"
