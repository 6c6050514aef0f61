#!/usr/bin/env bash
# The long chaos soak (integration/soak_test.go, TestSoak): a server and
# three agents as skiff processes on real containerd with simulated GPUs,
# under churn, while the server, an agent and containerd are killed -9 at
# random moments; invariants checked all along; a table at the end. Runs
# on a private containerd of its own (not the test command's), as root.
#
#   sudo ./hack/soak.sh [DURATION]   # churn phase, default 15m
#
#   SKIFF_SOAK_SEED   replay a run's fault and churn choices (it prints its seed)
#   SKIFF_SOAK_DIR    data root of its containerd (default /var/lib/skiff-soak)
#   SKIFF_SOAK_RUN    run root of its containerd (default /run/skiff-soak)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g} -Wno-deprecated-declarations"

duration=${1:-15m}
if [[ $(id -u) != 0 ]]; then
  echo "soak: needs root (containerd, runc)" >&2
  exit 1
fi
export SKIFF_CI_DIR=${SKIFF_SOAK_DIR:-/var/lib/skiff-soak}
export SKIFF_CI_RUN=${SKIFF_SOAK_RUN:-/run/skiff-soak}
./hack/containerd-start.sh
trap './hack/containerd-stop.sh' EXIT
export SKIFF_CONTAINERD_ADDRESS=$SKIFF_CI_RUN/containerd.sock

# Every wait inside the soak has its own deadline; -timeout only guards
# against the test binary hanging, so it is generous for any DURATION.
SKIFF_SOAK=long SKIFF_SOAK_DURATION=$duration \
  go test -count=1 -run '^TestSoak$' -v -timeout 24h ./integration/
