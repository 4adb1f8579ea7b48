#!/usr/bin/env bash
# Torch 1.13 clients rendezvousing against commstore and against torch's own TCPStore server, side by
# side in one run (scripts/torch_store_crowd.py: set, add, wait, get; two connections per client).
# usage: scripts/store_crowd.sh [ROUNDS] N...      e.g. scripts/store_crowd.sh 3 1000 4000
# Prints one line per server, size and round, then the medians. Needs Debian's /usr/bin/python3 with
# torch, and a built checkout (mvn -B install -DskipTests).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}; shift || true
[ $# -gt 0 ] && sizes=("$@") || sizes=(1000 4000)
ulimit -Sn "$(ulimit -Hn)"
py=/usr/bin/python3
crowd=scripts/torch_store_crowd.py
log=$(mktemp -d)
cleanup() { kill "${js:-}" "${ts:-}" "${hold:-}" 2>/dev/null || true; rm -rf "$log"; }
trap cleanup EXIT
port_j=$((30000 + RANDOM % 10000)); port_t=$((port_j + 1))
bin/commstore --port "$port_j" --quiet >"$log/j" 2>&1 & js=$!
mkfifo "$log/stdin"
sleep 100000 >"$log/stdin" & hold=$!
"$py" "$crowd" serve --port "$port_t" <"$log/stdin" >"$log/t" 2>&1 & ts=$!
for _ in $(seq 100); do grep -q listening "$log/j" && grep -q READY "$log/t" && break; sleep 0.1; done
grep -o 'holds.*' "$log/j" | sed 's/^/commstore /'
declare -A times
for n in "${sizes[@]}"; do
  for r in $(seq "$rounds"); do
    for server in jcomm torch; do
      port=$port_j; [ $server = torch ] && port=$port_t
      line=$("$py" "$crowd" crowd --port "$port" --clients "$n" --prefix "r$r-$n" --timeout-s 300 || true)
      echo "$server n=$n round=$r: $line"
      s=$(sed -n 's/.*errors=0 seconds=\([0-9.]*\).*/\1/p' <<<"$line")
      times[$server.$n]="${times[$server.$n]:-} ${s:-fail}"
    done
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR ? a[int((NR+1)/2)] : "-")}'; }
printf '\n| clients | commstore (s, median of %s) | torch server (s) |\n|---:|---:|---:|\n' "$rounds"
for n in "${sizes[@]}"; do
  printf '| %s | %s | %s |\n' "$n" "$(median <<<"${times[jcomm.$n]}")" "$(median <<<"${times[torch.$n]}")"
done
