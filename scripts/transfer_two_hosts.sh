#!/usr/bin/env bash
# `commbench transfer` across two simulated hosts (network namespaces joined by a veth pair, root
# only): the owner (`--serve`: a store server, an agent with an off-heap region, a raw socket sink) on
# host 1, the initiator (`--peer`) on host 2, distinct JCOMM_HOST_IDs. The peer prints the table: by
# size the engine's tcp write (issue, await) against a raw socket round of the same size, and once
# one raw socket's streaming throughput between the hosts, with the ratios. The namespaces are
# removed whatever happens.
# usage: scripts/transfer_two_hosts.sh [commbench transfer options for the peer...]
#        e.g. scripts/transfer_two_hosts.sh --max-bytes 16777216 --seconds 0.6 --tcp-streams 4
#        or   scripts/transfer_two_hosts.sh --many-to-one 4 --owners 2 --max-bytes 67108864 --min-bytes 4096 --seconds 2
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=xt$$
port=29731
max=1073741824
m2o=()   # the serving side holds the regions of a many-to-few run: the same shape on both sides
for ((i = 1; i <= $#; i++)); do   # the owner's region must hold the peer's largest size
  a=${!i}
  j=$((i + 1))
  case "$a" in
    --max-bytes=*) max=${a#*=} ;;
    --max-bytes) max=${!j} ;;
    --many-to-one=*|--owners=*|--min-bytes=*) m2o+=("$a") ;;
    --many-to-one|--owners|--min-bytes) m2o+=("$a" "${!j}") ;;
  esac
done
[[ $max == 1073741824 ]] && max=16777216
serve=""
cleanup() {
  set +e
  # whatever still runs in the two namespaces (the serving side, a first run's build of the tools), by id
  for pid in $(ip netns pids "$prefix-h1" 2>/dev/null) $(ip netns pids "$prefix-h2" 2>/dev/null); do
    kill -KILL "$pid" 2>/dev/null
  done
  [[ -n $serve ]] && wait "$serve" 2>/dev/null
  scripts/netns-hosts.sh down "$prefix"
  rm -f "/tmp/$prefix.serve"
}
trap cleanup EXIT
read -r a1 a2 < <(scripts/netns-hosts.sh up "$prefix")
JCOMM_HOST_ID=host-a ip netns exec "$prefix-h1" bin/commbench transfer --serve --listen "$a1:$port" --max-bytes "$max" \
  ${m2o[@]+"${m2o[@]}"} --timeout 600 >"/tmp/$prefix.serve" 2>&1 &
serve=$!
# bin/commbench builds the tools first when their sources changed: up to a few minutes
for _ in $(seq 1500); do
  grep -q '# serving:' "/tmp/$prefix.serve" && break
  kill -0 "$serve" 2>/dev/null || { cat "/tmp/$prefix.serve"; exit 1; }
  sleep 0.2
done
grep -q '# serving:' "/tmp/$prefix.serve" || { echo "the serving side did not start:"; cat "/tmp/$prefix.serve"; exit 1; }
JCOMM_HOST_ID=host-b ip netns exec "$prefix-h2" bin/commbench transfer --peer "$a1:$port" --timeout 600 "$@"
wait "$serve" || { echo "the serving side failed:"; cat "/tmp/$prefix.serve"; exit 1; }
serve=""
