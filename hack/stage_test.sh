#!/usr/bin/env bash
# Tests hack/stage.sh: stages are recorded in order, a failing stage
# prints the table with it marked and exits with its status. make test
# runs it.
set -uo pipefail
script="$(cd "$(dirname "$0")" && pwd)/stage.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export STAGES_FILE="$tmp/stages.txt"

failures=0
check() { # description condition...
  local desc=$1
  shift
  if "$@"; then echo "ok: $desc"; else echo "FAIL: $desc"; failures=$((failures + 1)); fi
}

"$script" --reset
"$script" "build a tool" -- true
"$script" vet -- true
out=$("$script" unit -- sh -c 'echo unit output; exit 3' 2>&1)
rc=$?
check "a failing stage exits with its command's status" [ "$rc" = 3 ]
want="unit output
make test: time by stage (min:s)
  build a tool                                    0:00
  vet                                             0:00
  unit                                            0:00  FAILED (exit 3)
  total                                           0:00"
check "a failing stage prints the table, itself marked" [ "$out" = "$want" ]
"$script" --reset
"$script" examples -- true
check "reset starts a new table" [ "$("$script" --report | sed -n 2p)" = "  examples                                        0:00" ]
"$script" e2e -- sleep 1.1
check "a stage's seconds are counted" grep -qE '^e2e	[1-9]	ok$' "$STAGES_FILE"
exit $((failures > 0))
