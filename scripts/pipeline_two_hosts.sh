#!/usr/bin/env bash
# The streaming pipeline across two simulated hosts (network namespaces joined by a veth pair, root
# only): raw TCP throughput between them first (one stream, 1 MiB writes), then `commbench pipeline`'s
# workload with TP1 x PP2, stage 0 on one host and stage 1 on the other (two commrun nodes, distinct
# JCOMM_HOST_IDs), and its hand-off rate against the raw rate.
# usage: scripts/pipeline_two_hosts.sh [HIDDEN,...] [STEPS]     e.g. scripts/pipeline_two_hosts.sh 16K,256K,1M 2000
set -euo pipefail
cd "$(dirname "$0")/.."
hidden=${1:-16K,256K,1M}
steps=${2:-0}
prefix=pl$$
read -r a1 a2 < <(scripts/netns-hosts.sh up "$prefix")
trap 'scripts/netns-hosts.sh down "$prefix"' EXIT
h1="$prefix-h1"; h2="$prefix-h2"
# raw TCP: 2 GiB in 1 MiB writes, one stream, h1 -> h2
raw=$(cat <<'PY'
import socket, sys, time
mode, addr = sys.argv[1], sys.argv[2]
total, chunk = 2 << 30, 1 << 20
if mode == "recv":
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((addr, 29871)); s.listen(1)
    c, _ = s.accept(); buf = bytearray(chunk); got = 0; t0 = None
    while got < total:
        n = c.recv_into(buf)
        if n == 0: break
        if t0 is None: t0 = time.perf_counter()
        got += n
    print("%.0f" % (got / (time.perf_counter() - t0) / 1e6))
else:
    c = socket.create_connection((addr, 29871)); data = bytes(chunk)
    for _ in range(total // chunk): c.sendall(data)
    c.close()
PY
)
ip netns exec "$h2" python3 -c "$raw" recv "$a2" >/tmp/$prefix.raw &
rp=$!
sleep 0.5
ip netns exec "$h1" python3 -c "$raw" send "$a2"
wait $rp
rawMBps=$(cat /tmp/$prefix.raw); rm -f /tmp/$prefix.raw
echo "# raw TCP between the namespaces (one stream, 1 MiB writes): $rawMBps MB/s"
# the pipeline: node 0 (stage 0, the store) on h1, node 1 (stage 1) on h2
sizes=$(python3 -c "import sys
out=[]
for x in sys.argv[1].split(','):
    x=x.strip().upper(); m={'K':1<<10,'M':1<<20}.get(x[-1:],1)
    out.append(str(int(x[:-1] if m>1 else x)*m))
print(','.join(out))" "$hidden")
args=(--nnodes 2 --nproc-per-node 1 --master-addr "$a1" --master-port 29872 --timeout 600 ${PIPELINE_JVM_ARGS:-}
      io.jcomm.tools.bench.pipeline.PipelineBenchWorker 1 2 200 "$steps" reuse "$sizes" ${PIPELINE_OPTIONS:-})
JCOMM_HOST_ID=host-a ip netns exec "$h1" bin/commrun --node-rank 0 "${args[@]}" >/tmp/$prefix.n0 2>&1 &
n0=$!
JCOMM_HOST_ID=host-b ip netns exec "$h2" bin/commrun --node-rank 1 "${args[@]}" >/tmp/$prefix.n1 2>&1 || { cat /tmp/$prefix.n1; }
wait $n0 || { cat /tmp/$prefix.n0; exit 1; }
printf '%10s %10s %10s %10s %8s\n' hidden bytes steps/s MB/s "of raw"
grep -o '@@row .*' /tmp/$prefix.n0 | while read -r _ h n ns _ _; do
  awk -v h="$h" -v n="$n" -v ns="$ns" -v raw="$rawMBps" 'BEGIN { sps = n / (ns / 1e9); mbs = sps * 4 * h / 1e6;
    printf "%10d %10d %10.0f %10.0f %7.0f%%\n", h, 4 * h, sps, mbs, 100 * mbs / raw }'
done
rm -f /tmp/$prefix.n0 /tmp/$prefix.n1
