#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages skiff needs. Run as root. Idempotent:
# apt-get skips packages that are already installed.
#
#   hack/ci-deps.sh         what the whole test suite needs (hack/test.sh):
#                           the lab packages below and the test-only ones
#   hack/ci-deps.sh --lab   what the course labs need (hack/up.sh): real
#                           containers and a pod network, so lab 1's page
#                           answers on localhost:30080
#   hack/ci-deps.sh --lab --missing
#                           print the lab packages not installed yet (one
#                           line, empty when none) and install nothing
#
# This file holds the one list of packages; hack/up.sh and hack/test.sh
# both call it.
set -euo pipefail

# The labs: containerd and runc run pods as real containers; the CNI
# plugins (bridge, host-local, portmap, loopback) give each pod a network
# namespace and an IP; iptables carries the service proxy (ClusterIP,
# NodePort 30080); iproute2 (ip) sets the routes between nodes.
lab_packages=(containerd runc containernetworking-plugins iptables iproute2)
# The tests only: busybox-static (test images are built from it), util-linux
# (nsenter, unshare), procps (ps, pkill in shell helpers) and
# python3-kubernetes (the Python client's test, integration/python_test.go)
# and chromium (headless, driven by chromedp in the dashboard's browser test,
# integration/dashboard_test.go).
test_packages=(busybox-static util-linux procps python3-kubernetes chromium)

lab=0 missing=0
for arg in "$@"; do
  case $arg in
    --lab) lab=1 ;;
    --missing) missing=1 ;;
    *) echo "ci-deps: unknown argument $arg (want --lab, --missing)" >&2; exit 2 ;;
  esac
done
packages=("${lab_packages[@]}")
if [[ $lab == 0 ]]; then
  packages+=("${test_packages[@]}")
fi

if [[ $missing == 1 ]]; then
  out=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || out+=("$p")
  done
  echo "${out[*]}"
  exit 0
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${packages[@]}" >/dev/null
