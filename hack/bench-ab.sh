#!/usr/bin/env bash
# A/B benchmarks: build REF (A) and the working tree (B) with the same
# harness, run the API, store, scheduler and memory benchmarks on both,
# back to back, alternating which goes first, over several rounds, and
# print every figure with min / median / max and the B/A ratio
# (hack/benchab; docs/performance.md has its tables and how to read them).
#
#   hack/bench-ab.sh 7ef9412                        # everything, 3 rounds
#   hack/bench-ab.sh ad0c92e -rounds 5 -benches api,store
#   hack/bench-ab.sh main -benches sched -profile /tmp/prof   # + profiles
#   hack/bench-ab.sh --smoke HEAD                   # tiny sizes, one round: the harness works
#   hack/bench-ab.sh --smoke                        # the same with A = B = the working tree
#                                                   # (one build; what hack/test.sh runs)
#   hack/bench-ab.sh --b ad0c92e 7ef9412            # two commits, neither the working tree
#
# Everything after REF goes to hack/benchab (-help lists the sizes). The
# harness itself (hack/benchab/target, hack/bench-scheduler) comes from the
# working tree and is copied into REF's tree before REF is built, so both
# builds run the same harness code; the load (API clients, Deployments) is
# hack/benchab, built once. REF's source is unpacked with `git archive`
# (no worktree is added) under $SKIFF_BENCH_AB_CACHE (default
# ~/.cache/skiff-bench-ab). The machine must be quiet for the figures to
# mean something: the script prints the load average before and after.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g} -Wno-deprecated-declarations"

# unpack REF: prints the directory of REF's source with this tree's harness in it.
unpack() {
  local sha src
  sha=$(git rev-parse --verify "$1^{commit}") || return 1
  src=${SKIFF_BENCH_AB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/skiff-bench-ab}/src-$sha
  if [[ ! -f $src/go.mod ]]; then
    rm -rf "$src"
    mkdir -p "$src"
    git archive "$sha" | tar -x -C "$src"
  fi
  # The same harness in both trees.
  for d in hack/bench-scheduler hack/benchab/target; do
    rm -rf "${src:?}/$d"
    mkdir -p "$src/$d"
    cp -r "$d/." "$src/$d/"
  done
  echo "$src"
}

# build TREE DIR: skiff, target and bench-scheduler of TREE into DIR.
build() {
  local tree=$1 dir=$2 tags=""
  mkdir -p "$dir"
  : >"$dir/features"
  if grep -qs 'type ResourceClaimTemplate struct' "$tree"/api/*.go; then
    tags=benchdra
    echo dra >>"$dir/features"
  fi
  # sched-spread: topology spread constraints (hack/bench-scheduler/spread.go).
  if grep -qs 'TopologySpreadConstraints' "$tree"/api/*.go; then
    echo spread >>"$dir/features"
  else
    tags="${tags:+$tags,}nospread"
  fi
  # api-secure: RBAC, ResourceQuota and Pod Security admission, and the
  # CertificateSigningRequest API (a student's certificate).
  if [[ -f $tree/controlplane/apiserver/rbac.go && -f $tree/controlplane/apiserver/admission_quota.go &&
    -f $tree/controlplane/apiserver/admission_podsecurity.go && -f $tree/controlplane/apiserver/certificates.go ]]; then
    echo secure >>"$dir/features"
  fi
  (
    cd "$tree"
    # go-nvml's C warnings are noise: show the log only when a build fails.
    go build -o "$dir/skiff" . 2>"$dir/build.log" &&
      go build -o "$dir/target" ./hack/benchab/target 2>>"$dir/build.log" &&
      go build -tags "$tags" -o "$dir/bench-scheduler" ./hack/bench-scheduler 2>>"$dir/build.log"
  ) || { echo "build of $tree failed:" >&2; cat "$dir/build.log" >&2; return 1; }
}

smoke=() bref=""
while [[ ${1:-} == --* ]]; do
  case $1 in
    --smoke) smoke=(-smoke); shift ;;
    --b) bref=${2:?--b needs a commit}; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
ref=""
if [[ ${#smoke[@]} -eq 0 || ( $# -gt 0 && ${1:-} != -* ) ]]; then
  ref=${1:?usage: hack/bench-ab.sh [--smoke] [--b REF2] REF [benchab flags]}
  shift
fi

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

if [[ -n $bref ]]; then
  b_name="$bref ($(git rev-parse --short "$bref^{commit}"))"
  echo "== building B ($b_name)" >&2
  build "$(unpack "$bref")" "$out/b"
else
  b_name="working tree ($(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . 2>/dev/null || echo ', with changes'))"
  echo "== building B (the $b_name)" >&2
  build "$PWD" "$out/b"
fi
if [[ -z $ref ]]; then
  a_dir=$out/b a_name=$b_name
else
  a_name="$ref ($(git rev-parse --short "$ref^{commit}"))"
  echo "== building A ($a_name)" >&2
  build "$(unpack "$ref")" "$out/a"
  a_dir=$out/a
fi
go build -o "$out/benchab" ./hack/benchab
"$out/benchab" -a "$a_dir" -b "$out/b" -a-name "$a_name" -b-name "$b_name" "${smoke[@]}" "$@"
