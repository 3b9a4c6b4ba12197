#!/usr/bin/env bash
# hack/deps.sh MODE...: the Debian packages a target needs, checked and, as
# root, installed. The one list of them: make run, make test and .ci/run
# call it (make deps-run, make deps).
#
#   run        make run: haproxy (configcheck runs the real haproxy -c)
#   real-node  make run REAL_NODE=1 and the install suite: Debian's
#              containerd (ctr with it), runc, the CNI plugins in
#              /usr/lib/cni, nft for the Service's DNAT, ip for the bridge
#              (docs/real-node.md)
#   test       make test and .ci/run: run's and real-node's, make, git, gcc
#              for the race detector (cgo), and qemu-user's static
#              emulators for the image's other architecture (hack/image's
#              TestHaproxyRunsFromTheImageFiles, make test-emulated)
#
# With everything there it runs nothing else (no apt-get, no network): the
# targets depend on it on every run. As root it installs what is missing
# with apt-get, as .ci/run did. Otherwise it prints the one command to run
# and fails, before any build starts.
set -euo pipefail

# Programs are looked up on PATH and in the system directories a normal
# user's PATH may lack (haproxy, runc, nft and ip live in /usr/sbin).
PATH="$PATH:/usr/sbin:/sbin"

# requirement: program-or-absolute-file package
reqs=()
for mode in "$@"; do
  case $mode in
    run) reqs+=("haproxy haproxy") ;;
    real-node) reqs+=("containerd containerd" "ctr containerd" "runc runc" "nft nftables" "ip iproute2"
      "/usr/lib/cni/bridge containernetworking-plugins") ;;
    test) reqs+=("make make" "git git" "gcc build-essential" "haproxy haproxy"
      "containerd containerd" "ctr containerd" "runc runc" "nft nftables" "ip iproute2"
      "/usr/lib/cni/bridge containernetworking-plugins"
      "qemu-aarch64-static qemu-user-static" "qemu-x86_64-static qemu-user-static") ;;
    *) echo "usage: hack/deps.sh run|real-node|test..." >&2; exit 2 ;;
  esac
done
((${#reqs[@]})) || { echo "usage: hack/deps.sh run|real-node|test..." >&2; exit 2; }

# missing prints the packages of the requirements not met, once each, in
# the order above.
missing() {
  local req have pkg pkgs=()
  for req in "${reqs[@]}"; do
    read -r have pkg <<<"$req"
    if [[ $have == /* ]]; then [ -e "$have" ] && continue; else command -v "$have" >/dev/null && continue; fi
    [[ " ${pkgs[*]-} " == *" $pkg "* ]] || pkgs+=("$pkg")
  done
  echo "${pkgs[*]-}"
}

pkgs=$(missing)
[ -n "$pkgs" ] || exit 0

# One line, ending with the command: what a newcomer copies.
if [ "$(id -u)" != 0 ]; then
  echo "deps: missing Debian packages ($*), install them: sudo apt-get install -y $pkgs" >&2
  exit 1
fi
command -v apt-get >/dev/null || { echo "deps: missing $pkgs ($*), and no apt-get here: install them with this system's package manager" >&2; exit 1; }
echo "deps: installing $pkgs (apt-get, as root)"
export DEBIAN_FRONTEND=noninteractive
# shellcheck disable=SC2086 # one word a package
apt-get update -qq && apt-get install -y -qq $pkgs
# A package that installed without what it was for (another name, a
# broken install) fails here rather than in a test.
if left=$(missing) && [ -n "$left" ]; then
  echo "deps: still missing after apt-get install: $left" >&2
  exit 1
fi
