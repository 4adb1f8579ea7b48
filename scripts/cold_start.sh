#!/usr/bin/env bash
# Cold start of the demo: from commrun launching 4 worker JVMs to every TP2 x PP2 group ready (the
# demo's "groups ready X s after the JVMs were launched", its slowest rank), RUNS times; prints each
# run's figure and the median. With class-data sharing on (the default), one unmeasured run first
# writes the workers' archive if there is none. torch's counterpart: scripts/torch_cold_start.py.
# usage: scripts/cold_start.sh [-n RUNS] [--commrun PATH] [-- more demo args]
#        JCOMM_CDS=off scripts/cold_start.sh   (the JVMs without archives)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUNS=5
COMMRUN="$ROOT/bin/commrun"
while [ $# -gt 0 ]; do
  case "$1" in
    -n) RUNS="$2"; shift 2 ;;
    --commrun) COMMRUN="$2"; shift 2 ;;
    --) shift; break ;;
    *) echo "usage: $0 [-n RUNS] [--commrun PATH] [-- demo args]" >&2; exit 2 ;;
  esac
done
demo() {
  "$COMMRUN" --nproc-per-node 4 demo --tp 2 --pp 2 --steps 20 --warmup 5 "$@" 2>&1
}
"$COMMRUN" --help >/dev/null # builds the tools if needed (not measured)
export JCOMM_NO_BUILD=1
if [ "${JCOMM_CDS:-on}" != off ]; then
  demo "$@" >/dev/null # writes the archives of the launcher and of the workers when missing
fi
echo "# cold_start: $COMMRUN --nproc-per-node 4 demo --tp 2 --pp 2, JCOMM_CDS=${JCOMM_CDS:-on}, $RUNS runs"
figures=()
cpus=()
for i in $(seq 1 "$RUNS"); do
  out=$(demo "$@")
  f=$(sed -n 's/.*groups ready \([0-9.]*\) s after.*/\1/p' <<<"$out")
  c=$(sed -n 's/.*groups ready .*, \([0-9.]*\) s CPU in all.*/\1/p' <<<"$out")
  [ -n "$f" ] || { echo "run $i: no figure in:" >&2; echo "$out" >&2; exit 1; }
  figures+=("$f")
  cpus+=("${c:-0}")
  echo "run $i: all groups ready $f s after launch, ${c:-?} s CPU of all ranks until then (load $(cut -d' ' -f1-3 /proc/loadavg))"
done
median() { sort -n | awk '{a[NR]=$1} END {m = NR % 2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2;
  printf "%.2f s (min %.2f, max %.2f)", m, a[1], a[NR]}'; }
echo "median $(printf '%s\n' "${figures[@]}" | median); CPU $(printf '%s\n' "${cpus[@]}" | median)"
