#!/usr/bin/env bash
# make test-loaded: make test on a busy machine, as contributors' machines
# are. For the whole run one core spins at full speed (a CPU hog pinned to
# the last CPU) and a `make run` control plane with Gatehouse serves beside
# the tests (or the one already running in this checkout, which the second
# would refuse). RUNS=3 repeats make test; every run must pass.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-1}
make=${MAKE:-make}
out=bin/test-loaded
mkdir -p "$out"

# What make test and make run need, built before the load starts: the
# builds are not what this measures.
"$make" tools build
# In make build's configuration (the Makefile's GO_STATIC): a link.
CGO_ENABLED=0 go build -trimpath -o bin/devenv ./hack/devenv

# Stopped at exit: the hog with SIGTERM (a background job of a script
# ignores SIGINT), make run's launcher with SIGINT, as Ctrl-C stops it.
pids=()
hog=
cleanup() {
  [ -z "$hog" ] || kill -TERM "$hog" 2>/dev/null || true
  for pid in "${pids[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
  for pid in $hog "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

cpu=$(($(nproc) - 1))
taskset -c "$cpu" bash -c 'while :; do :; done' &
hog=$!
echo "test-loaded: a CPU hog spins on CPU $cpu (PID $hog)"

# make run's own process (devenv) directly, so that its PID is the one to
# stop with SIGINT, as Ctrl-C would.
bin/devenv >"$out/run.log" 2>&1 &
runpid=$!
for _ in $(seq 600); do
  if grep -q '^gatehouse: ready' "$out/run.log"; then
    pids+=("$runpid")
    echo "test-loaded: make run serves beside the tests (log: $out/run.log)"
    break
  fi
  if ! kill -0 "$runpid" 2>/dev/null; then
    if grep -q 'in use by PID' "$out/run.log"; then
      echo "test-loaded: the make run already running in this checkout serves beside the tests"
      break
    fi
    echo "test-loaded: make run failed:" >&2
    tail -20 "$out/run.log" >&2
    exit 1
  fi
  sleep 1
done

for i in $(seq "$runs"); do
  start=$(date +%s)
  if ! "$make" --no-print-directory test; then
    echo "test-loaded: loaded run $i of $runs FAILED after $(($(date +%s) - start)) s" >&2
    exit 1
  fi
  echo "test-loaded: loaded run $i of $runs passed in $(($(date +%s) - start)) s"
done
