#!/usr/bin/env bash
# The main job of README.md: a working one-machine cluster with the
# embedded defaults. As root it installs what the course labs need from the
# distribution (containerd, runc, the CNI plugins, iptables, iproute2: the
# list is hack/ci-deps.sh --lab), so pods are real containers with an IP
# each and lab 1's page answers on localhost:30080; then it builds skiff
# into ./bin and runs `skiff up`. Without root it still works: pods run on
# the simulated runtime, and `skiff up` says which labs that leaves out.
# Extra arguments go to `skiff up` (e.g. --gpus sim:dgxa100).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
# go-nvml's C headers mark old NVML calls deprecated: without this, a first
# build prints a hundred compiler warnings that are not skiff's and not
# errors. (The #cgo lines are in the module cache, not ours to change.)
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g} -Wno-deprecated-declarations"

if ! command -v go >/dev/null; then
  echo "error: Go 1.26 or newer is needed to build skiff (https://go.dev/dl)" >&2
  exit 1
fi

if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
  missing=$(./hack/ci-deps.sh --lab --missing)
  if [[ -n $missing ]]; then
    echo "== installing what the labs need (Debian/Ubuntu packages): $missing"
    ./hack/ci-deps.sh --lab
  fi
fi
# containerd_answers: something answers on containerd's socket. A socket
# file alone is not enough: a containerd that was killed leaves its
# socket behind, and skiff would then fall back to simulated pods.
containerd_answers() {
  if command -v ctr >/dev/null; then
    timeout 5 ctr --address /run/containerd/containerd.sock version >/dev/null 2>&1
  else
    [[ -S /run/containerd/containerd.sock ]]
  fi
}
if [[ $(id -u) == 0 ]] && command -v containerd >/dev/null && ! containerd_answers && ! pgrep -x containerd >/dev/null; then
  echo "== starting containerd"
  if command -v systemctl >/dev/null && systemctl start containerd 2>/dev/null; then :; else
    mkdir -p /run/containerd
    nohup containerd >/var/log/skiff-containerd.log 2>&1 &
    for _ in $(seq 1 100); do containerd_answers && break; sleep 0.1; done
  fi
fi

echo "== building skiff"
mkdir -p bin
go build -o bin/skiff .
echo "== bin/skiff up $*   (put bin/ on your PATH to use skiff from other terminals)"
exec ./bin/skiff up "$@"
