#!/usr/bin/env bash
# The per-token figures of the Llama example (examples/llama) beside torch 1.13 with gloo
# (docs/PERFORMANCE.md, "A Llama decoder on jcomm"): TP1, TP2 and TP2 x PP2 on the demo model, 2 requests
# of 64 and 72 new tokens after a 32-token warm-up, once each, jcomm then torch. Checks that both give the
# same tokens.
# usage: scripts/llama_figures.sh [OUT_DIR]     (env JCOMM_LLAMA_MODEL: the model directory)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODEL="${JCOMM_LLAMA_MODEL:-${TMPDIR:-/tmp}/jcomm-llama-demo-f32-seed16}"
OUT="${1:-${TMPDIR:-/tmp}/jcomm-llama-figures}"
mkdir -p "$OUT"
cd "$ROOT"
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD), load $(cut -d' ' -f1-3 /proc/loadavg), model $MODEL"
echo "| layout | jcomm p50 ms | jcomm p99 ms | jcomm tokens/s | jcomm in comm calls | torch p50 ms | torch p99 ms | torch tokens/s | torch in comm calls |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for layout in "1 1" "2 1" "2 2"; do
  read -r tp pp <<<"$layout"
  n=$((tp * pp))
  j="$OUT/jcomm-tp$tp-pp$pp.txt"
  t="$OUT/torch-tp$tp-pp$pp.txt"
  # the first run writes the demo model when it is not there yet
  bin/commrun --nproc-per-node "$n" model --tp "$tp" --pp "$pp" --model "$MODEL" --prompts 2 --tokens 64 --no-check >"$j" 2>&1
  /usr/bin/python3 scripts/torch_llama_tp.py --model "$MODEL" --tp "$tp" --pp "$pp" --prompts 2 --tokens 64 >"$t" 2>&1
  diff <(grep -o 'llama: request [0-9]* tokens .*' "$j" | sed 's/llama: request \([0-9]*\) tokens/\1/') \
       <(grep '^TOKENS ' "$t" | sed 's/^TOKENS //') >/dev/null \
    || { echo "tokens differ between jcomm and torch at TP $tp x PP $pp (see $j and $t)" >&2; exit 1; }
  jd=$(grep -o 'p50 [0-9.]* ms, p99 [0-9.]* ms per token (rank 0), [0-9.]* tokens/s' "$j" | head -1)
  jc=$(grep -o 'inside jcomm calls: [0-9.]* %' "$j" | head -1 | grep -o '[0-9.]* %')
  read -r jp50 jp99 jtps <<<"$(sed 's/p50 \([0-9.]*\) ms, p99 \([0-9.]*\) ms per token (rank 0), \([0-9.]*\) tokens\/s/\1 \2 \3/' <<<"$jd")"
  r=$(grep '^RESULT ' "$t")
  tp50=$(grep -o 'p50_ms=[0-9.]*' <<<"$r" | cut -d= -f2)
  tp99=$(grep -o 'p99_ms=[0-9.]*' <<<"$r" | cut -d= -f2)
  ttps=$(grep -o 'tokens_per_s=[0-9.]*' <<<"$r" | cut -d= -f2)
  tcs=$(grep -o 'comm_share=[0-9.]*' <<<"$r" | cut -d= -f2)
  printf '| TP%s x PP%s (%s JVMs / processes) | %s | %s | %s | %s | %s | %s | %s | %.1f %% |\n' \
    "$tp" "$pp" "$n" "$jp50" "$jp99" "$jtps" "$jc" "$tp50" "$tp99" "$ttps" "$(awk -v c="$tcs" 'BEGIN { print c * 100 }')"
done
echo "# raw output: $OUT"
