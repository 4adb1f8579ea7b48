#!/usr/bin/env bash
# The small-operation figures of docs/PERFORMANCE.md ("Small operations on one host"): jcomm's tcp
# backend through the ProcessGroup and through GroupCoordinator (commbench --api), beside torch 1.13
# gloo (scripts/torch_gloo_bench.py), alternating per round in one session; quote medians.
# jcomm warms up for 100,000 iterations: its operations reach their steady state only once the JIT's
# second tier has compiled them, which on two busy cores takes about a second (the first ~70,000
# small all-reduces run at ~13 us instead of ~1.6 us); torch's gloo has no JIT and keeps 5,000.
# Round 1 also prints each rank's idle CPU after 2 s without traffic (commbench --idle-cpu).
# usage: scripts/bench/small-ops.sh [OUT_DIR] [ROUNDS] [NPROC]   (default /tmp/jcomm-small, 3, 2)
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${1:-/tmp/jcomm-small}"
ROUNDS="${2:-3}"
N="${3:-2}"
PY=/usr/bin/python3
PIN=--pin
mkdir -p "$OUT"
cd "$ROOT"
JCOMM_NO_BUILD= bin/commbench --help > /dev/null  # builds the tools once if needed
export JCOMM_NO_BUILD=1
run() { # name, command...
  local name="$1"; shift
  echo "### $name: $*" | tee -a "$OUT/$name.txt"
  echo "# load: $(cut -d' ' -f1-3 /proc/loadavg)  $(date -u +%FT%TZ)" >> "$OUT/$name.txt"
  "$@" >> "$OUT/$name.txt" 2>&1 || echo "# exit $?" >> "$OUT/$name.txt"
}
API=process-group,coordinator
W=100000
for r in $(seq 1 "$ROUNDS"); do
  IDLE=; [ "$r" = 1 ] && IDLE="--idle-cpu 5"
  run barrier        bin/commbench barrier --api $API --nproc "$N" $PIN -n 20000 -w $W $IDLE
  run barrier-torch  $PY scripts/torch_gloo_bench.py barrier --nproc "$N" $PIN -n 20000 -w 5000
  run allreduce      bin/commbench allreduce --api $API --nproc "$N" $PIN -b 1K -e 64K -f 64 -n 20000 -w $W
  run allreduce-torch $PY scripts/torch_gloo_bench.py allreduce --nproc "$N" $PIN -b 1K -e 64K -f 64 -n 20000 -w 5000
  run agobj          bin/commbench allgather-object --api $API --nproc "$N" $PIN -n 20000 -w $W
  run agobj-torch    $PY scripts/torch_gloo_bench.py allgather-object --nproc "$N" $PIN -n 20000 -w 5000
  run bobj           bin/commbench broadcast-object --api $API --nproc "$N" $PIN -n 20000 -w $W
  run bobj-torch     $PY scripts/torch_gloo_bench.py broadcast-object --nproc "$N" $PIN -n 20000 -w 5000
  run sendrecv       bin/commbench sendrecv --api $API --nproc "$N" $PIN -b 64 -e 64 -n 20000 -w $W
  run sendrecv-torch $PY scripts/torch_gloo_bench.py sendrecv --nproc "$N" $PIN -b 64 -e 64 -n 20000 -w 5000
done
echo "raw output in $OUT"
