#!/usr/bin/env bash
# Runs every benchmark behind docs/PERFORMANCE.md, side by side in one session, and keeps the raw
# output. usage: scripts/perf-all.sh [OUT_DIR] [ROUNDS]   (default /tmp/jcomm-perf, 3 rounds)
# Each collective figure is measured ROUNDS times, alternating jcomm (tcp and gloo in one launch)
# with torch 1.13 gloo (scripts/torch_gloo_bench.py, same sizes and timing rule); quote medians.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:-/tmp/jcomm-perf}"
ROUNDS="${2:-3}"
PY=/usr/bin/python3
mkdir -p "$OUT"
cd "$ROOT"
export JCOMM_NO_BUILD=1  # sources edited during the run must not trigger a rebuild mid-measurement
run() { # name, command...
  local name="$1"; shift
  echo "### $name: $*" | tee -a "$OUT/$name.txt"
  echo "# load: $(cut -d' ' -f1-3 /proc/loadavg)  $(date -u +%FT%TZ)" >> "$OUT/$name.txt"
  "$@" >> "$OUT/$name.txt" 2>&1 || echo "# exit $?" >> "$OUT/$name.txt"
}
JCOMM_NO_BUILD= bin/commbench --help > /dev/null  # builds the tools once if needed
for r in $(seq 1 "$ROUNDS"); do
  run n2-barrier        bin/commbench barrier --backend tcp,gloo --nproc 2 -n 20000 -w 2000 --json "$OUT/n2-barrier-$r.json"
  run n2-barrier-torch  $PY scripts/torch_gloo_bench.py barrier --nproc 2 -n 20000 -w 2000
  run n2-bobj           bin/commbench broadcast-object --backend tcp,gloo --nproc 2 -n 20000 -w 2000 --json "$OUT/n2-bobj-$r.json"
  run n2-bobj-torch     $PY scripts/torch_gloo_bench.py broadcast-object --nproc 2 -n 20000 -w 2000
  run n2-allreduce      bin/commbench allreduce --backend tcp,gloo --nproc 2 -b 1K -e 64M -f 4 -w 10 -n 30 --json "$OUT/n2-allreduce-$r.json"
  run n2-allreduce-torch $PY scripts/torch_gloo_bench.py allreduce --nproc 2 -b 1K -e 64M -f 4 -w 10 -n 30
  run n4-allreduce      bin/commbench allreduce --backend tcp,gloo --nproc 4 -b 1K -e 64M -f 4 -w 10 -n 20 --json "$OUT/n4-allreduce-$r.json"
  run n4-allreduce-torch $PY scripts/torch_gloo_bench.py allreduce --nproc 4 -b 1K -e 64M -f 4 -w 10 -n 20
done
run n4-barrier          bin/commbench barrier --backend tcp,gloo --nproc 4 -n 5000 -w 1000
run n4-barrier-torch    $PY scripts/torch_gloo_bench.py barrier --nproc 4 -n 5000 -w 1000
run n4-allgather        bin/commbench allgather --backend tcp,gloo --nproc 4 -b 64K -e 64M -f 8 -w 10 -n 20
run n4-allgather-torch  $PY scripts/torch_gloo_bench.py allgather --nproc 4 -b 64K -e 64M -f 8 -w 10 -n 20
run n4-broadcast        bin/commbench broadcast --backend tcp,gloo --nproc 4 -b 64K -e 64M -f 8 -w 10 -n 20
run n4-broadcast-torch  $PY scripts/torch_gloo_bench.py broadcast --nproc 4 -b 64K -e 64M -f 8 -w 10 -n 20
run n2-sendrecv         bin/commbench sendrecv --backend tcp,gloo --nproc 2 -b 1K -e 64M -f 8 -w 10 -n 30
run n2-sendrecv-torch   $PY scripts/torch_gloo_bench.py sendrecv --nproc 2 -b 1K -e 64M -f 8 -w 10 -n 30
for op in barrier broadcast-object allgather-object broadcast-tensor-dict; do
  run n2-api-$op        bin/commbench $op --api process-group,coordinator --backend tcp --nproc 2 --json "$OUT/n2-api-$op.json"
done
run n2-api-sendrecv     bin/commbench sendrecv --api process-group,coordinator --backend tcp --nproc 2 -b 64 -e 64 --json "$OUT/n2-api-sendrecv.json"
run n2-api-allreduce    bin/commbench allreduce --api process-group,coordinator --backend tcp --nproc 2 --json "$OUT/n2-api-allreduce.json"
run mq-1                bin/commbench mq --readers 1
run mq-3                bin/commbench mq --readers 3
run mq-1-remote         bin/commbench mq --readers 1 --remote
run store               bin/commbench store
run init                bin/commbench init --tp 2 --pp 2 --iterations 20
run init-warm           bin/commbench init --tp 2 --pp 2 --iterations 20 --warmup 40
run init-warm-mq-local  bin/commbench init --tp 2 --pp 2 --iterations 20 --warmup 40 --mq-across-hosts-only
run init-warm-mq-during  bin/commbench init --tp 2 --pp 2 --iterations 20 --warmup 40 --mq-background=false
run demo                bash -c 'time bin/commrun --nproc-per-node 4 demo --tp 2 --pp 2'
run cold-start          scripts/cold_start.sh -n 5
run cold-start-torch    $PY scripts/torch_cold_start.py -n 5
echo "raw output in $OUT"
