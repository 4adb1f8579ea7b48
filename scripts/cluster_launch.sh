#!/usr/bin/env bash
# Launch to ready under each launcher on this machine: from the launcher's command to every TP2 x PP2 group of
# the demo ready on its 4 ranks (the demo's "groups ready X s after the JVMs were launched", slowest rank,
# measured from JCOMM_LAUNCH_EPOCH_MS, which this script sets just before the launcher's command), RUNS times
# each, median and range:
#   commrun             bin/commrun --nproc-per-node 4 demo
#   srun, task per rank srun -n 4 java @bin/jvm.flags -cp <dist jar> PipelineDemo
#   srun + commrun      srun -N 1 --ntasks-per-node 1 bin/commrun --nproc-per-node 4 demo
#   mpirun              mpirun -np 4 java @bin/jvm.flags -cp <dist jar> PipelineDemo
# A one-node Slurm (slurmctld + slurmd, auth/none, state in a temporary directory) is started for the srun rows
# and stopped at the end. Needs root, Debian's slurmctld/slurmd/slurm-client and openmpi-bin.
# usage: scripts/cluster_launch.sh [-n RUNS]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUNS=5
[ "${1:-}" = -n ] && RUNS="$2"
"$ROOT/bin/commrun" --help >/dev/null # builds the tools if needed (not measured)
export JCOMM_NO_BUILD=1
JAR=$(ls "$ROOT"/dist/target/jcomm-dist-*-all.jar | head -1)
TASK=(java @"$ROOT/bin/jvm.flags" -cp "$JAR" io.jcomm.tools.demo.PipelineDemo --tp 2 --pp 2 --steps 20 --warmup 5)

DIR=$(mktemp -d /tmp/jcomm-slurm.XXXXXX)
H=$(hostname -s)
mkdir -p "$DIR"/{state,spool,log}
cat >"$DIR/slurm.conf" <<EOF
ClusterName=jcomm
SlurmctldHost=$H(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/none
CredType=cred/none
ProctrackType=proctrack/pgid
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SlurmdParameters=config_overrides
SlurmctldPort=16817
SlurmdPort=16818
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
MailProg=/bin/true
NodeName=$H NodeAddr=127.0.0.1 CPUs=4
PartitionName=main Nodes=ALL Default=YES OverSubscribe=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="$DIR/slurm.conf"
cleanup() {
  scancel --partition=main >/dev/null 2>&1 || true
  for f in slurmd slurmctld; do [ -f "$DIR/$f.pid" ] && kill "$(cat "$DIR/$f.pid")" 2>/dev/null || true; done
  sleep 1
  rm -rf "$DIR"
}
trap cleanup EXIT
slurmctld -c -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF"
for _ in $(seq 100); do [ "$(sinfo -h -o %t 2>/dev/null)" = idle ] && break; sleep 0.2; done

ready() { sed -n 's/.*groups ready \([0-9.]*\) s after.*/\1/p' | head -1; }
measure() { # name, command...
  local name="$1"; shift
  local figures=() out f
  "$@" >/dev/null 2>&1 || true # one unmeasured run: class-data archives, page cache
  for i in $(seq 1 "$RUNS"); do
    export JCOMM_LAUNCH_EPOCH_MS=$(date +%s%3N)
    out=$("$@" 2>&1) || { echo "$name: run $i failed:" >&2; echo "$out" >&2; exit 1; }
    f=$(ready <<<"$out")
    [ -n "$f" ] || { echo "$name: no figure in:" >&2; echo "$out" >&2; exit 1; }
    figures+=("$f")
  done
  unset JCOMM_LAUNCH_EPOCH_MS
  printf '%s\n' "${figures[@]}" | sort -n | awk -v n="$name" '{a[NR]=$1} END {
    m = NR % 2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2; printf "%-22s %6.2f s   (%.2f-%.2f, %d runs)\n", n, m, a[1], a[NR], NR}'
}
echo "# launch to every group ready, demo TP2 x PP2 on 4 ranks, one node, $(nproc) CPUs, $(date -u +%F), $(git -C "$ROOT" rev-parse --short HEAD)"
echo "# launcher               median   (min-max)"
measure commrun "$ROOT/bin/commrun" --nproc-per-node 4 demo --tp 2 --pp 2 --steps 20 --warmup 5
measure "srun, task per rank" srun -n 4 "${TASK[@]}"
measure "srun + commrun" srun -N 1 --ntasks-per-node 1 "$ROOT/bin/commrun" --nproc-per-node 4 demo --tp 2 --pp 2 --steps 20 --warmup 5
measure mpirun mpirun --allow-run-as-root --oversubscribe -np 4 -x JCOMM_LAUNCH_EPOCH_MS "${TASK[@]}"
