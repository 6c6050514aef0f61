#!/usr/bin/env bash
# The test command of README.md: everything a fresh Debian/Ubuntu machine
# needs to run skiff's whole test suite, as root.
#
#   1. install Debian packages (containerd, runc, CNI plugins, busybox-static,
#      iptables) unless already present;
#   2. start a private containerd (own socket, root and state dirs) so the
#      tests never touch a system containerd;
#   3. run unit tests (race detector on), integration tests (real
#      containerd, network namespaces) and the short chaos soak;
#   4. stop containerd, whatever happened.
#
# Set SKIP_INTEGRATION=1 to run the unit tier only (no root needed then).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
# go-nvml's C headers mark old NVML calls deprecated; the compiler's
# hundred warnings about them are not skiff's and not errors (hack/up.sh).
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g} -Wno-deprecated-declarations"

if ! command -v go >/dev/null; then
  echo "error: Go 1.26 or newer is needed (https://go.dev/dl); /usr/local/go/bin/go not found" >&2
  exit 1
fi

# As root, install the Debian packages first: some unit-tier packages test
# against the real thing when it is there and must not skip under CI
# (CNI plugins in a throwaway network namespace, busybox sh for the
# simulated nvidia-smi).
if [[ $(id -u) == 0 ]]; then
  echo "== installing test dependencies"
  ./hack/ci-deps.sh
fi

# The course is typed with the real kubectl: many tests run it
# (internal/kubectltest: $KUBECTL, /usr/bin/kubectl or kubectl on $PATH).
if [[ -z "${KUBECTL:-}" && ! -x /usr/bin/kubectl ]] && ! command -v kubectl >/dev/null; then
  echo "error: kubectl 1.32 is needed at /usr/bin/kubectl (or set \$KUBECTL): the tests run the real kubectl against skiff" >&2
  exit 1
fi

go mod download
go vet ./...
echo "== staticcheck"
# Pinned, fetched through the module proxy; not a dependency of skiff itself.
go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
echo "== generated deep copies"
./hack/deepcopy.sh --check

# Every tier goes through hack/testsummary: it prints the failures, the
# skips and how many tests ran, and fails on a skip not on its allow-list
# (a missing prerequisite must not pass by skipping).
summary_dir=$(mktemp -d)
summary_bin=$summary_dir/testsummary
cleanup() { rm -rf "$summary_dir"; }
trap cleanup EXIT
go build -o "$summary_bin" ./hack/testsummary

echo "== unit tests"
# Packages under integration/ and runtime/containerd need containerd; everything else is unit tier.
unit_pkgs=$(go list ./... | grep -v -e '/integration' -e '/runtime/containerd')
go test -race -count=1 -timeout 15m -json $unit_pkgs | "$summary_bin" -tier "unit tier"

echo "== A/B benchmark harness, smoke (hack/bench-ab.sh: tiny sizes, one round, nothing timed)"
# So the harness that compares builds never rots; A = B = this tree.
./hack/bench-ab.sh --smoke >/dev/null

if [[ "${SKIP_INTEGRATION:-}" == 1 ]]; then
  echo "SKIP_INTEGRATION=1: integration tier skipped"
  exit 0
fi

if [[ $(id -u) != 0 ]]; then
  echo "error: integration tests need root (containerd, network namespaces); run with sudo or SKIP_INTEGRATION=1" >&2
  exit 1
fi

echo "== starting a private containerd"
./hack/containerd-start.sh
trap 'cleanup; ./hack/containerd-stop.sh' EXIT
export SKIFF_CONTAINERD_ADDRESS=/run/skiff-ci/containerd.sock

echo "== integration tests (real containerd)"
go test -count=1 -timeout 20m -p 1 -json ./runtime/containerd/... ./integration/... | "$summary_bin" -tier "integration tier"

echo "== chaos soak, short (integration/soak_test.go; hack/soak.sh runs the long one)"
# About two minutes: kill -9 of the server, an agent and containerd under
# churn; any invariant violation fails it. -v: it prints its table.
SKIFF_SOAK=short go test -count=1 -timeout 10m -run '^TestSoak$' -json ./integration/ | "$summary_bin" -v -tier "chaos soak"
