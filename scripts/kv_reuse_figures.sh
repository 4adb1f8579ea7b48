#!/usr/bin/env bash
# The shared-prefix figures of docs/PERFORMANCE.md ("KV-cache reuse"): ROUNDS runs of the Llama demo's
# shared-prefix workload at TP2 (each run: the requests without reuse, then with the prefix cache, the
# tokens compared), then `commbench kv-index` at 1M blocks. Prints each run's lines and the medians with
# their ranges.
# usage: scripts/kv_reuse_figures.sh [ROUNDS] [GROUPS] [PER_GROUP] [SYSTEM_TOKENS] [QUESTION_TOKENS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}; groups=${2:-4}; per=${3:-4}; sys=${4:-192}; q=${5:-32}
export JCOMM_NO_BUILD=${JCOMM_NO_BUILD:-1}
index=/dev/shm/jcomm-kv-figures-$$.cmap
log=$(mktemp)
trap 'rm -f "$index" "$log"' EXIT
for r in $(seq 1 "$rounds"); do
  rm -f "$index"
  JCOMM_KV_INDEX=$index bin/commrun --nproc-per-node 2 model --tp 2 --workload shared-prefix --groups "$groups" \
      --per-group "$per" --system-tokens "$sys" --question-tokens "$q" --tokens 8 --max-seq 512 --prefix-cache \
      --compare-reuse --no-check 2>&1 | grep -E "llama: (prefix cache|without reuse|reuse check|kv: host index|OK|FAILED)" \
      | sed "s/^/run $r: /" | tee -a "$log"
done
python3 - "$log" <<'PY'
import re, statistics, sys
rows = {"with": [], "without": []}
for line in open(sys.argv[1]):
    m = re.search(r"prefix cache: \d+ requests, prompt tokens computed (\d+), reused (\d+).*TTFT p50 ([0-9.]+) ms, p99 ([0-9.]+) ms", line)
    if m: rows["with"].append(tuple(float(x) for x in m.groups()))
    m = re.search(r"without reuse: prompt tokens computed (\d+); TTFT p50 ([0-9.]+) ms, p99 ([0-9.]+) ms", line)
    if m: rows["without"].append((float(m.group(1)), 0.0, float(m.group(2)), float(m.group(3))))
def cell(v): return "%.1f [%.1f-%.1f]" % (statistics.median(v), min(v), max(v))
print("| | prompt tokens computed | reused | TTFT p50 ms | TTFT p99 ms |")
print("|---|---|---|---|---|")
for k in ("without", "with"):
    r = rows[k]
    if r:
        print("| %s reuse | %d | %d | %s | %s |" % (k, r[0][0], r[0][1], cell([x[2] for x in r]), cell([x[3] for x in r])))
PY
bin/commbench kv-index --entries 1000000 --processes 4 --lookups 200000 --rounds "$rounds" 2>&1 | grep '^kv-index'
