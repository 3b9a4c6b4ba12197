#!/usr/bin/env bash
# Tests hack/deps.sh's verdicts on a PATH of stand-ins: programs missing
# from it, a normal user (a stand-in id, and really nobody when run as
# root) and root with a stand-in apt-get that records what it is asked and
# installs nothing real. make test runs it.
set -uo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
# A copy, run from the temporary directory: nobody may not reach the
# checkout (a home directory is often 0700).
script="$tmp/deps.sh"
cp "$(dirname "$0")/deps.sh" "$script"
chmod 755 "$script"
cd "$tmp" || exit 1

# Everything deps.sh test looks for on PATH.
programs=(make git gcc haproxy containerd ctr runc nft ip qemu-aarch64-static qemu-x86_64-static)
# The CNI plugins are a file in /usr/lib/cni, not a program: whether this
# machine has them is not the stand-ins' to decide.
cni=
[ -e /usr/lib/cni/bridge ] || cni=" containernetworking-plugins"

# bindir NAME UID HIDDEN...: a PATH directory with bash, a stand-in for
# each program but HIDDEN, an id that answers UID (none: the real id) and
# an apt-get that logs its arguments and, on install, makes the stand-ins
# named in FAKE_PROVIDES.
bindir() {
  local dir="$tmp/$1" uid=$2 p
  shift 2
  mkdir -p "$dir"
  ln -s "$(command -v bash)" "$dir/bash"
  printf '#!/bin/sh\nexit 0\n' >"$dir/stub"
  chmod 755 "$dir/stub"
  for p in "${programs[@]}"; do
    [[ " $* " == *" $p "* ]] || ln -s stub "$dir/$p"
  done
  if [ "$uid" = none ]; then
    ln -s "$(command -v id)" "$dir/id"
  else
    printf '#!/bin/sh\necho %s\n' "$uid" >"$dir/id"
    chmod 755 "$dir/id"
  fi
  cat >"$dir/apt-get" <<FAKE
#!/bin/sh
echo "\$*" >>"$dir/apt.log"
if [ "\$1" = install ]; then for p in \${FAKE_PROVIDES:-}; do $(command -v ln) -sf stub "$dir/\$p"; done; fi
exit 0
FAKE
  chmod 755 "$dir/apt-get"
  echo "$dir"
}

failures=0
# expect WANT-RC WANT-OUTPUT WANT-APT-LOG DESCRIPTION -- COMMAND...: the
# output is stdout and stderr together; the apt-get log one call a line.
expect() {
  local rc=$1 want=$2 wantapt=$3 desc=$4 out got apt
  shift 5
  out=$("$@" 2>&1)
  got=$?
  apt=$(cat "$dir/apt.log" 2>/dev/null)
  if [[ $got != "$rc" || $out != "$want" || $apt != "$wantapt" ]]; then
    printf 'FAIL: %s\n    exit %s, want %s\n    output:  %q\n    want:    %q\n    apt-get: %q\n    want:    %q\n' \
      "$desc" "$got" "$rc" "$out" "$want" "$apt" "$wantapt"
    failures=$((failures + 1))
  else
    echo "ok: $desc"
  fi
}
run() { env -i PATH="$dir" FAKE_PROVIDES="${FAKE_PROVIDES:-}" "$script" "$@"; }

dir=$(bindir all-user 1000)
expect 0 "" "" "a user with everything make test needs: nothing to say, no apt-get" -- run test

dir=$(bindir some-user 1000 gcc qemu-x86_64-static containerd)
expect 1 "deps: missing Debian packages (test), install them: sudo apt-get install -y build-essential containerd${cni} qemu-user-static" "" \
  "a user without gcc, a qemu emulator and containerd: one line, the one command, no apt-get" -- run test

dir=$(bindir run-user 1000 containerd git)
expect 0 "" "" "make run needs haproxy alone" -- run run
expect 1 "deps: missing Debian packages (run real-node), install them: sudo apt-get install -y containerd${cni}" "" \
  "make run REAL_NODE=1 needs the real node's packages" -- run run real-node

dir=$(bindir all-root 0)
expect 0 "" "" "root with everything: no apt-get update" -- run test

dir=$(bindir some-root 0 git)
FAKE_PROVIDES=git expect 0 "deps: installing git (apt-get, as root)" $'update -qq\ninstall -y -qq git' \
  "root without git: apt-get update, then install" -- run test

dir=$(bindir broken-root 0 git)
expect 1 $'deps: installing git (apt-get, as root)\ndeps: still missing after apt-get install: git' $'update -qq\ninstall -y -qq git' \
  "root whose install leaves git missing: fails" -- run test

# The real uid check: as a real normal user (nobody when this runs as root).
dir=$(bindir real-user none git)
as_user=()
[ "$(id -u)" != 0 ] || as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
expect 1 "deps: missing Debian packages (test), install them: sudo apt-get install -y git${cni}" "" \
  "a real normal user without git: the one command" -- "${as_user[@]}" env -i PATH="$dir" "$script" test
exit $((failures > 0))
