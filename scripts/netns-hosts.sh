#!/usr/bin/env bash
# Two simulated hosts: network namespaces joined by a veth pair (root only).
#   scripts/netns-hosts.sh up PREFIX       creates PREFIX-h1 (10.77.X.1) and PREFIX-h2 (10.77.X.2)
#   scripts/netns-hosts.sh down PREFIX     removes both (and the veth pair with them)
#   scripts/netns-hosts.sh cut PREFIX      takes the link down on both ends
#   scripts/netns-hosts.sh heal PREFIX     brings it up again
# X is derived from PREFIX so that two sets can coexist. Run a command on a host with
#   ip netns exec PREFIX-h1 <command>
set -euo pipefail
cmd="${1:?usage: netns-hosts.sh up|down|cut|heal PREFIX}"
p="${2:?usage: netns-hosts.sh up|down|cut|heal PREFIX}"
x=$(( $(printf '%s' "$p" | cksum | cut -d' ' -f1) % 200 + 20 ))
h1="$p-h1"; h2="$p-h2"; v1="${p:0:9}a"; v2="${p:0:9}b"
case "$cmd" in
  up)
    ip netns add "$h1"
    ip netns add "$h2"
    ip link add "$v1" type veth peer name "$v2"
    ip link set "$v1" netns "$h1"
    ip link set "$v2" netns "$h2"
    ip -n "$h1" addr add "10.77.$x.1/24" dev "$v1"
    ip -n "$h2" addr add "10.77.$x.2/24" dev "$v2"
    for h in "$h1" "$h2"; do ip -n "$h" link set lo up; done
    ip -n "$h1" link set "$v1" up
    ip -n "$h2" link set "$v2" up
    echo "10.77.$x.1 10.77.$x.2"
    ;;
  down)
    ip netns del "$h1" 2>/dev/null || true
    ip netns del "$h2" 2>/dev/null || true
    ;;
  cut)
    ip -n "$h1" link set "$v1" down
    ip -n "$h2" link set "$v2" down
    ;;
  heal)
    ip -n "$h1" link set "$v1" up
    ip -n "$h2" link set "$v2" up
    ;;
  *) echo "unknown command $cmd" >&2; exit 2 ;;
esac
