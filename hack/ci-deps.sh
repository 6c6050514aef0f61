#!/usr/bin/env bash
# Installs the Debian packages the integration tier needs: containerd and runc
# (the real runtime), busybox-static (the files test images are built from),
# the standard CNI plugins and iptables (pod networking). Run as root.
# Idempotent: apt-get skips packages that are already installed.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y containerd runc busybox-static containernetworking-plugins iptables iproute2 util-linux procps
