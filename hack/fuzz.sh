#!/usr/bin/env bash
# Runs every fuzz target for a while: `go test ./...` only replays their
# seed corpora (f.Add and testdata/fuzz/FuzzX/), this explores.
#
#   hack/fuzz.sh              # every target, 60 s each
#   hack/fuzz.sh 300          # five minutes each
#   hack/fuzz.sh 30 ./api/... # only the targets of these packages
#
# Targets are found with `go test -list 'Fuzz.*'`, one package at a time
# (go test -fuzz takes one target of one package). For each it prints the
# executions and the new interesting inputs; a failing input is written
# by Go to PACKAGE/testdata/fuzz/FuzzX/ and the script goes on with the
# next target and exits 1 at the end. Keep a crasher there as a seed once
# the bug is fixed. FUZZ_PARALLEL sets the fuzzing workers (default: all
# cores). FUZZ_MINIMIZE bounds the minimizing of each new interesting input
# (default 2s; Go's 60 s default lets a worker minimize a large input for
# longer than a short run, with no execs counted meanwhile).
# docs/reliability.md ("Fuzzing") records the last runs.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g} -Wno-deprecated-declarations"

secs=${1:-60}
shift || true
pkgs=("$@")
[[ ${#pkgs[@]} -gt 0 ]] || pkgs=(./...)
parallel=(-fuzzminimizetime "${FUZZ_MINIMIZE:-2s}")
[[ -n ${FUZZ_PARALLEL:-} ]] && parallel+=(-parallel "$FUZZ_PARALLEL")

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
failed=()
printf '%-16s %-40s %12s %8s  %s\n' package target execs new result
for pkg in $(go list "${pkgs[@]}"); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  ls "$dir"/*_test.go >/dev/null 2>&1 || continue
  targets=$(go test -list 'Fuzz.*' "$pkg" 2>/dev/null | grep '^Fuzz' || true)
  for target in $targets; do
    log=$logs/$target.log
    if go test "$pkg" -run '^$' -fuzz "^${target}\$" -fuzztime "${secs}s" "${parallel[@]}" >"$log" 2>&1; then
      result=ok
    else
      result=FAIL
      failed+=("$pkg $target")
    fi
    last=$(grep -E '^fuzz: elapsed' "$log" | tail -1)
    execs=$(sed -nE 's/.*execs: ([0-9]+).*/\1/p' <<<"$last")
    new=$(sed -nE 's/.*new interesting: ([0-9]+).*/\1/p' <<<"$last")
    printf '%-16s %-40s %12s %8s  %s\n' "${pkg#skiff.dev/skiff/}" "$target" "${execs:-?}" "${new:-?}" "$result"
    if [[ $result == FAIL ]]; then
      grep -vE '^fuzz: elapsed' "$log" | tail -40 | sed 's/^/    /'
    fi
  done
done
if [[ ${#failed[@]} -gt 0 ]]; then
  printf 'failed: %s\n' "${failed[@]}" >&2
  exit 1
fi
