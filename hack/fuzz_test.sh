#!/usr/bin/env bash
# Tests hack/fuzz.sh's verdicts with a stand-in for `go` that plays each
# outcome of a fuzz run on a one-target tree: make test runs it.
set -uo pipefail
script="$(cd "$(dirname "$0")" && pwd)/fuzz.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/internal/x"
printf 'package x\n\nfunc FuzzA(f *testing.F) {}\n' >"$tmp/internal/x/x_test.go"
cat >"$tmp/go" <<'FAKE'
#!/usr/bin/env bash
# FAKE_FUZZ: pass | deadline | crash | panic; FAKE_REPLAY: pass | fail
args=" $* "
if [[ $args == *" -fuzz "* ]]; then
  case $FAKE_FUZZ in
    pass) echo PASS; exit 0 ;;
    deadline) printf -- '--- FAIL: FuzzA (6.03s)\n    context deadline exceeded\nFAIL\n'; exit 1 ;;
    crash) mkdir -p internal/x/testdata/fuzz/FuzzA && touch internal/x/testdata/fuzz/FuzzA/0123
      printf -- '--- FAIL: FuzzA (1.00s)\n    context deadline exceeded\n    Failing input written to testdata/fuzz/FuzzA/0123\nFAIL\n'; exit 1 ;;
    panic) printf -- '--- FAIL: FuzzA (1.00s)\n    panic: boom\nFAIL\n'; exit 1 ;;
  esac
fi
[[ $FAKE_REPLAY == pass ]]
FAKE
chmod +x "$tmp/go"

failures=0
expect() { # want-rc fuzz replay description
  rm -rf "$tmp/internal/x/testdata"
  out=$(cd "$tmp" && GO="$tmp/go" FAKE_FUZZ=$2 FAKE_REPLAY=$3 FUZZTIME=1s "$script" 2>&1)
  rc=$?
  if [[ $rc != "$1" ]]; then
    echo "FAIL: $4: exit $rc, want $1"; echo "$out" | sed 's/^/    /'; failures=$((failures + 1))
  else
    echo "ok: $4"
  fi
}
expect 0 pass pass "a clean run passes"
expect 0 deadline pass "the coordinator's bare deadline with a clean corpus replay passes"
expect 1 deadline fail "the coordinator's deadline with a failing corpus replay fails"
expect 1 crash pass "a written reproducer fails, whatever else the run printed"
expect 1 panic pass "any other failure fails"
exit $((failures > 0))
