#!/usr/bin/env bash
# make test's stages, timed: where a run's time went, printed at its end
# (README's timing table is measured with it).
#
#   hack/stage.sh NAME -- COMMAND...  run COMMAND; append "NAME<tab>SECONDS<tab>ok|FAILED"
#                                     to $STAGES_FILE; when it fails, print the table
#                                     and exit with its status
#   hack/stage.sh --reset             start a new table
#   hack/stage.sh --report            print the table
#
# STAGES_FILE defaults to bin/make-test-stages.txt.
set -uo pipefail
file=${STAGES_FILE:-bin/make-test-stages.txt}

report() {
  [ -s "$file" ] || return 0
  echo "make test: time by stage (min:s)"
  awk -F '\t' '
    function dur(s) { return sprintf("%d:%02d", s / 60, s % 60) }
    { total += $2; printf "  %-44s %7s%s\n", $1, dur($2), ($3 == "ok" ? "" : "  " $3) }
    END { printf "  %-44s %7s\n", "total", dur(total) }
  ' "$file"
}

case ${1-} in
  --reset) mkdir -p "$(dirname "$file")" && : >"$file"; exit ;;
  --report) report; exit ;;
esac
[ $# -ge 3 ] && [ "$2" = -- ] || { echo "usage: hack/stage.sh NAME -- COMMAND... | --reset | --report" >&2; exit 2; }
name=$1
shift 2
mkdir -p "$(dirname "$file")"
start=$(date +%s)
"$@"
status=$?
result=ok
[ $status = 0 ] || result="FAILED (exit $status)"
printf '%s\t%s\t%s\n' "$name" "$(($(date +%s) - start))" "$result" >>"$file"
if [ $status != 0 ]; then
  report
fi
exit $status
