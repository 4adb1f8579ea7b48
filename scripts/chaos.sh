#!/usr/bin/env bash
# kill -9 of one random rank of a 4-JVM TP2 x PP2 demo job, at random phases, with workers started
# directly (torchrun's environment, rank 0 hosts the store; no launcher that would stop the others).
# For each trial prints: trial phase victim outcome seconds-from-kill-to-last-survivor-exit and the
# survivors' exception types. A survivor still running at timeout + 5 s is a HANG (it is then killed).
# usage: scripts/chaos.sh [TRIALS] [TIMEOUT_MS] [PHASES]   (default 20, 10000, "init warmup steps stop")
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TRIALS="${1:-20}"
TIMEOUT_MS="${2:-10000}"
PHASES=(${3:-init warmup steps stop})
JAR=$(ls "$ROOT"/dist/target/jcomm-dist-*.jar | grep -v -e '-tests\.jar$' -e '-all\.jar$' | head -1)
[ -n "$JAR" ] || { echo "build the tools first: bin/commbench --help" >&2; exit 1; }
CP="$JAR:$ROOT/dist/target/lib/*"
WORK=$(mktemp -d /tmp/jcomm-chaos.XXXXXX)
trap 'pkill -9 -f "jcomm-chaos-marker" 2>/dev/null; rm -rf "$WORK"' EXIT
hangs=0
for t in $(seq 1 "$TRIALS"); do
  phase=${PHASES[$(( (t - 1) % ${#PHASES[@]} ))]}
  victim=$(( RANDOM % 4 ))
  port=$(( 20000 + RANDOM % 20000 ))
  pids=()
  for r in 0 1 2 3; do
    MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RANK=$r WORLD_SIZE=4 LOCAL_RANK=$r LOCAL_WORLD_SIZE=4 \
      JCOMM_TIMEOUT_MS=$TIMEOUT_MS \
      java @"$ROOT/bin/jvm.flags" -Xmx512m -Djcomm.chaos=jcomm-chaos-marker -cp "$CP" \
      io.jcomm.tools.demo.PipelineDemo --tp 2 --pp 2 --steps 100000000 --warmup 200 --phases \
      > "$WORK/$t.$r.out" 2> "$WORK/$t.$r.err" &
    pids+=($!)
  done
  # wait for the phase, plus a random delay inside it
  case $phase in
    init) # while the victim makes its groups (a rank killed before it reached the store can only be
          # noticed at the others' deadline: nobody knew it existed)
          for i in $(seq 1 600); do grep -q "phase group" "$WORK/$t.$victim.out" 2>/dev/null && break; sleep 0.01; done
          sleep 0.0$(( RANDOM % 10 )) ;;
    warmup) for i in $(seq 1 600); do grep -q "phase warmup" "$WORK/$t.$victim.out" 2>/dev/null && break; sleep 0.01; done ;;
    steps|stop) for i in $(seq 1 600); do grep -q "phase steps" "$WORK/$t.$victim.out" 2>/dev/null && break; sleep 0.05; done
           sleep 0.$(( RANDOM % 9 + 1 )) ;;
  esac
  if [ "$phase" = stop ]; then  # SIGSTOP a random peer for a second first, then the kill
    other=$(( (victim + 1 + RANDOM % 3) % 4 ))
    kill -STOP "${pids[$other]}" 2>/dev/null; sleep 1; kill -CONT "${pids[$other]}" 2>/dev/null
  fi
  killed_at=$(date +%s.%N)
  kill -9 "${pids[$victim]}" 2>/dev/null
  limit=$(( TIMEOUT_MS / 1000 + 5 ))
  outcome=ok
  exits=""
  declare -A gone=()
  for i in $(seq 1 $(( limit * 50 ))); do
    alive=0
    for r in 0 1 2 3; do
      [ $r = $victim ] && continue
      [ -n "${gone[$r]:-}" ] && continue
      if kill -0 "${pids[$r]}" 2>/dev/null; then alive=1; else gone[$r]=$(echo "$(date +%s.%N) - $killed_at" | bc); fi
    done
    [ $alive = 0 ] && break
    sleep 0.02
  done
  for r in 0 1 2 3; do
    [ $r = $victim ] && continue
    if [ -z "${gone[$r]:-}" ]; then outcome=HANG; exits="$exits r$r:-"; else exits="$exits r$r:$(printf '%.2f' "${gone[$r]}")"; fi
  done
  unset gone
  last=$(date +%s.%N)
  took=$(echo "$last - $killed_at" | bc)
  [ $outcome = HANG ] && { hangs=$((hangs + 1)); for r in 0 1 2 3; do jstack "${pids[$r]}" > "$WORK/../chaos-hang-$t.$r.txt" 2>/dev/null; done; }
  types=""
  for r in 0 1 2 3; do
    [ $r = $victim ] && continue
    ty=$(grep -o -m1 -E 'io\.jcomm\.api\.[A-Za-z]+Exception' "$WORK/$t.$r.err" | sed 's/io.jcomm.api.//')
    types="$types r$r:${ty:-none}"
  done
  wait "${pids[@]}" 2>/dev/null
  printf '%3d %-7s victim=%d %-4s %6.2f s %s |%s\n' "$t" "$phase" "$victim" "$outcome" "$took" "$types" "$exits"
  for r in 0 1 2 3; do kill -9 "${pids[$r]}" 2>/dev/null; done
  cp "$WORK"/$t.*.err /tmp/ 2>/dev/null
done
echo "trials $TRIALS hangs $hangs"
