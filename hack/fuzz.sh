#!/usr/bin/env bash
# Runs every native Go fuzz target for FUZZTIME each, one after another.
#
# A target fails when Go writes a reproducer to its testdata/fuzz/<Target>/
# or when the corpus (seeds and reproducers found before) fails on replay.
# Go 1.26's fuzz coordinator can also end a healthy run with a bare
# "context deadline exceeded" at the -fuzztime boundary (golang/go#75804,
# fixed in Go 1.27): that run wrote nothing and its corpus replays clean, so
# it is reported as a coordinator stop and the target passes.
set -uo pipefail

GO=${GO:-go}
FUZZTIME=${FUZZTIME:-30s}
FUZZMINIMIZETIME=${FUZZMINIMIZETIME:-5s}
read -r -a extra <<<"${FUZZFLAGS:-}"

failed=()
coordinator_stops=()
log=$(mktemp)
trap 'rm -f "$log"' EXIT

reproducers() { # dir target: list of files Go has written for target
  ls -1 "$1/testdata/fuzz/$2" 2>/dev/null | sort
}

for dir in $(grep -rlE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*\(' api cmd internal | xargs -n1 dirname | sort -u); do
  # The targets by their declarations, not go test -list: listing compiles
  # each package's tests in one more configuration (neither the race
  # detector's nor the fuzzer's instrumentation), which cost a cold CI
  # about three minutes. A target in a file this platform does not build
  # is then run by name and matches nothing.
  for name in $(sed -nE 's/^func (Fuzz[A-Za-z0-9_]*)\(.*/\1/p' "$dir"/*_test.go | sort -u); do
    echo "== ./$dir $name for $FUZZTIME"
    before=$(reproducers "$dir" "$name")
    if $GO test "./$dir" -run '^$' -fuzz "^$name\$" -fuzztime "$FUZZTIME" \
      -fuzzminimizetime "$FUZZMINIMIZETIME" "${extra[@]}" 2>&1 | tee "$log"; then
      continue
    fi
    after=$(reproducers "$dir" "$name")
    if [[ "$before" == "$after" ]] && grep -qx '    context deadline exceeded' "$log" &&
      ! grep -q 'Failing input written to' "$log"; then
      echo "== ./$dir $name: no reproducer written; replaying its corpus"
      if $GO test "./$dir" -run "^$name\$" -count 1; then
        coordinator_stops+=("./$dir:$name")
        continue
      fi
    fi
    failed+=("./$dir:$name")
  done
done

if ((${#coordinator_stops[@]})); then
  echo "fuzz runs ended by the coordinator's deadline (golang/go#75804), corpus replayed clean: ${coordinator_stops[*]}"
fi
if ((${#failed[@]})); then
  echo "fuzz targets that failed: ${failed[*]}"
  exit 1
fi
