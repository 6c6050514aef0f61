#!/usr/bin/env bash
# Writes api/zz_generated.deepcopy.go: the DeepCopyInto, DeepCopy and
# DeepCopyObject methods of the API's types, made by Kubernetes' own
# deepcopy-gen from the +k8s:deepcopy-gen tags in package api (pinned,
# fetched through the module proxy; a tool, not a dependency of skiff).
# Run it after changing a type in api/. With --check (hack/test.sh), it
# changes nothing and fails when the committed file is not what the
# generator writes now.
set -euo pipefail
cd "$(dirname "$0")/.."
out=api/zz_generated.deepcopy.go
gen() {
  local log
  log=$(mktemp)
  if ! go run k8s.io/code-generator/cmd/deepcopy-gen@v0.37.2 \
      --output-file zz_generated.deepcopy.go --go-header-file /dev/null ./api 2>"$log"; then
    cat "$log" >&2
    rm -f "$log"
    return 1
  fi
  rm -f "$log"
}
if [[ ${1:-} != --check ]]; then
  gen
  exit
fi
keep=$(mktemp)
cp "$out" "$keep"
trap 'cp "$keep" "$out"; rm -f "$keep"' EXIT
gen
if ! cmp -s "$keep" "$out"; then
  diff -u "$keep" "$out" | head -40 >&2 || true
  echo "error: $out is not what deepcopy-gen writes for api/ now: run hack/deepcopy.sh and commit it" >&2
  exit 1
fi
echo "$out: up to date"
