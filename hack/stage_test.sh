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
# A stage that straddles a second boundary counts one second (date +%s),
# so the durations are compared by shape, not value.
out=$(printf '%s\n' "$out" | sed -E 's/ [0-9]+:[0-9]{2}( |$)/ M:SS\1/')
check "a failing stage exits with its command's status" [ "$rc" = 3 ]
want="unit output
make test: time by stage (min:s)
  build a tool                                    M:SS
  vet                                             M:SS
  unit                                            M:SS  FAILED (exit 3)
  total                                           M:SS"
check "a failing stage prints the table, itself marked" [ "$out" = "$want" ]
"$script" --reset
"$script" examples -- true
check "reset starts a new table" grep -qE '^  examples +0:0[01]$' <("$script" --report | sed -n 2p)
"$script" e2e -- sleep 1.1
check "a stage's seconds are counted" grep -qE '^e2e	[1-9]	ok$' "$STAGES_FILE"
exit $((failures > 0))
