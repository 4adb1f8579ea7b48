#!/usr/bin/env bash
# GPU check of jcomm's NCCL device communicator (provider cuda:nccl) on a host with NVIDIA GPUs.
#
# What it does:
#   1. finds the NVIDIA driver, libnccl.so.2 (pip nvidia-nccl-cu13: site-packages/nvidia/nccl/lib, or
#      the system) and libcudart.so.13 (pip nvidia-cuda-runtime >= 13: site-packages/nvidia/cu13/lib,
#      the CUDA toolkit, or the system);
#   2. builds device-communicator/nccl and the core it needs (no install) and runs
#      io.jcomm.device.internal.nccl.GpuCheck (a test class of device-communicator-nccl) on
#      GPU 0: the probe's verdict; the conformance kit at world size 1 through NCCL itself
#      (allReduce/allGather/reduceScatter/gather/broadcast with exact values, send/recv to self in a
#      group call) and with the local shortcut; error paths (NCCL's own error string, typed errors,
#      abort, bounded close); the per-call overhead of an allReduce of 4 B from Java;
#   3. the same allReduce timed in C (scripts/gpu-check/nccl_overhead.c) when gcc and the NCCL and
#      CUDA headers are present, and through torch.distributed when torch has CUDA;
#   4. with 2 or more GPUs, the multi-rank conformance across JVMs (one rank per GPU; NCCL refuses
#      two ranks of one communicator on the same GPU, so one GPU can only check world size 1).
#
# Usage: scripts/gpu-check.sh [calls]        (calls per overhead measurement, default 20000)
# Environment overrides: NCCL_LIBDIR, CUDART_LIBDIR, NCCL_INCLUDE, CUDA_INCLUDE, PYTHON, JAVA_HOME, and
# JCOMM_GPU_CHECK_CP: a class path built on another machine, for a GPU host without Maven or network
# (build it with `mvn -pl device-communicator/nccl -am test-compile dependency:build-classpath
# -Dmdep.includeScope=test`; copy device-communicator/nccl/target/{test-classes,classes},
# device-communicator/core/target/{test-classes,classes} and the jars, and a JDK 17 runtime made by
# jlink if the host has none; step 4 still needs Maven and is skipped without it).
# Exit status: 0 all checks passed; 1 a check failed; 2 no GPU/driver/NCCL found (reason printed).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
CALLS="${1:-20000}"
PY="${PYTHON:-python3}"
OUT="$(mktemp -d "${TMPDIR:-/tmp}/jcomm-gpu-check.XXXXXX")"
trap 'rm -rf "$OUT"' EXIT
say() { printf '\n== %s\n' "$*"; }
die2() { echo "gpu-check: $*" >&2; exit 2; }

# ---- 1. driver, GPUs, libraries ----
say "driver and GPUs"
command -v nvidia-smi >/dev/null 2>&1 || die2 "nvidia-smi not found: no NVIDIA driver on this host"
nvidia-smi -L || die2 "nvidia-smi failed: the driver cannot see a GPU"
GPUS=$(nvidia-smi -L | grep -c '^GPU ' || true)
[ "$GPUS" -ge 1 ] || die2 "no GPU listed by nvidia-smi"
echo "GPUs: $GPUS"

# pip puts the NVIDIA libraries under site-packages/nvidia/<name>/lib: NCCL in nvidia/nccl/lib; the
# CUDA 13 wheels (nvidia-cuda-runtime >= 13) group theirs in nvidia/cu13/lib, CUDA 12 ones used
# nvidia/cuda_runtime/lib
pip_dir() { # $1 = module under nvidia (nccl, cu13, cuda_runtime), $2 = lib|include
  "$PY" - "$1" "$2" 2>/dev/null <<'PYEOF' || true
import importlib, os, sys
try:
    m = importlib.import_module("nvidia." + sys.argv[1])
except Exception:
    sys.exit(0)
for base in list(getattr(m, "__path__", [])) + ([os.path.dirname(m.__file__)] if getattr(m, "__file__", None) else []):
    d = os.path.join(base, sys.argv[2])
    if os.path.isdir(d):
        print(d)
        break
PYEOF
}
ld_dir() { # directory of $1 in the dynamic linker's cache
  ldconfig -p 2>/dev/null | awk -v lib="$1" '$1 == lib { print $NF; exit }' | xargs -r dirname
}

NCCL_LIBDIR="${NCCL_LIBDIR:-$(pip_dir nccl lib)}"
[ -n "$NCCL_LIBDIR" ] || NCCL_LIBDIR="$(ld_dir libnccl.so.2)"
[ -n "$NCCL_LIBDIR" ] && [ -e "$NCCL_LIBDIR/libnccl.so.2" ] \
  || die2 "libnccl.so.2 not found: pip install nvidia-nccl-cu13 (NCCL >= 2.29), or set NCCL_LIBDIR"
CUDART_LIBDIR="${CUDART_LIBDIR:-$(pip_dir cu13 lib)}"
[ -n "$CUDART_LIBDIR" ] && [ -e "$CUDART_LIBDIR/libcudart.so.13" ] || CUDART_LIBDIR="$(pip_dir cuda_runtime lib)"
[ -n "$CUDART_LIBDIR" ] && [ -e "$CUDART_LIBDIR/libcudart.so.13" ] || CUDART_LIBDIR="$(ld_dir libcudart.so.13)"
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-13*/lib*; do
  [ -n "$CUDART_LIBDIR" ] && break
  [ -e "$d/libcudart.so.13" ] && CUDART_LIBDIR="$d"
done
[ -n "$CUDART_LIBDIR" ] || die2 "libcudart.so.13 not found: pip install 'nvidia-cuda-runtime>=13', or set CUDART_LIBDIR"
echo "libnccl.so.2:    $NCCL_LIBDIR"
echo "libcudart.so.13: $CUDART_LIBDIR"
strings "$NCCL_LIBDIR/libnccl.so.2" 2>/dev/null | grep -m1 '^NCCL version' || true
export LD_LIBRARY_PATH="$NCCL_LIBDIR:$CUDART_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# ---- 2. build and run the Java check ----
if [ -n "${JCOMM_GPU_CHECK_CP:-}" ]; then
  # a host without Maven (or without the network): the class path was built elsewhere (see Usage)
  say "prebuilt class path (JCOMM_GPU_CHECK_CP); nothing is built"
  CP="$JCOMM_GPU_CHECK_CP"
else
  say "build device-communicator-nccl and the core (test classes; nothing is installed)"
  # -am: every module writes cp.txt in turn; device-communicator/nccl, which needs all the others,
  # comes last, so the file ends up holding its test class path
  mvn -B -q -pl device-communicator/nccl -am test-compile dependency:build-classpath \
      -Dmdep.outputFile="$OUT/cp.txt" -Dmdep.includeScope=test
  NCCL_MOD="$ROOT/device-communicator/nccl/target" CORE_MOD="$ROOT/device-communicator/core/target"
  CP="$NCCL_MOD/test-classes:$NCCL_MOD/classes:$CORE_MOD/test-classes:$CORE_MOD/classes:$(cat "$OUT/cp.txt")"
fi
JAVA="${JAVA_HOME:+$JAVA_HOME/bin/}java"
JFLAGS=(@"$ROOT/bin/jvm.flags" -Djcomm.nccl.libdir="$NCCL_LIBDIR" -Djcomm.cuda.libdir="$CUDART_LIBDIR"
        -Dorg.slf4j.simpleLogger.defaultLogLevel=warn)

say "Java: world size 1 on GPU 0, error paths, per-call overhead"
status=0
"$JAVA" "${JFLAGS[@]}" -cp "$CP" io.jcomm.device.internal.nccl.GpuCheck "$CALLS" | tee "$OUT/java.txt" || status=$?
if [ "$status" -eq 2 ]; then
  die2 "the NCCL provider reports itself unavailable (reason above)"
fi

# ---- 3. the same call from C (or torch) ----
say "baseline: ncclAllReduce of 4 B called from C"
NCCL_INCLUDE="${NCCL_INCLUDE:-$(pip_dir nccl include)}"
[ -n "$NCCL_INCLUDE" ] || { [ -e /usr/include/nccl.h ] && NCCL_INCLUDE=/usr/include; } || true
# a usable CUDA include directory has cuda_runtime_api.h and the crt/ headers it includes (the pip
# runtime wheel ships the first without the second; the toolkit has both)
cuda_inc_ok() { [ -n "$1" ] && [ -e "$1/cuda_runtime_api.h" ] && [ -e "$1/crt/host_defines.h" ]; }
if [ -z "${CUDA_INCLUDE:-}" ]; then
  for d in "$(pip_dir cu13 include)" "$(pip_dir cuda_runtime include)" /usr/local/cuda/include \
           /usr/local/cuda-13*/include /usr/include; do
    cuda_inc_ok "$d" && { CUDA_INCLUDE="$d"; break; }
  done
fi
if command -v gcc >/dev/null 2>&1 && [ -n "$NCCL_INCLUDE" ] && [ -e "$NCCL_INCLUDE/nccl.h" ] \
   && cuda_inc_ok "${CUDA_INCLUDE:-}"; then
  # pip wheels ship libnccl.so.2 / libcudart.so.13 without the unversioned link names: link by path
  gcc -O2 -o "$OUT/nccl_overhead" scripts/gpu-check/nccl_overhead.c -I"$NCCL_INCLUDE" -I"$CUDA_INCLUDE" \
      "$NCCL_LIBDIR/libnccl.so.2" "$CUDART_LIBDIR/libcudart.so.13" -Wl,-rpath,"$NCCL_LIBDIR:$CUDART_LIBDIR"
  "$OUT/nccl_overhead" "$CALLS" | tee "$OUT/c.txt" || status=1
else
  echo "SKIP C baseline: need gcc with nccl.h and the CUDA runtime headers (the CUDA toolkit, or pip"
  echo "     nvidia-nccl-cu13 and nvidia-cuda-runtime)"
fi
say "baseline: torch.distributed all_reduce of 4 B (nccl backend, world size 1)"
if "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  "$PY" - "$CALLS" <<'PYEOF' | tee "$OUT/torch.txt" || status=1
import os, sys, time, torch, torch.distributed as dist
n = int(sys.argv[1])
os.environ.setdefault("MASTER_ADDR", "127.0.0.1"); os.environ.setdefault("MASTER_PORT", "29531")
dist.init_process_group("nccl", rank=0, world_size=1)
t = torch.ones(1, device="cuda:0"); s = torch.cuda.Stream()
with torch.cuda.stream(s):
    for _ in range(min(n, 5000)): dist.all_reduce(t)
    s.synchronize(); t0 = time.perf_counter()
    for _ in range(n): dist.all_reduce(t)
    t1 = time.perf_counter(); s.synchronize(); m = max(1, n // 10); t2 = time.perf_counter()
    for _ in range(m): dist.all_reduce(t); s.synchronize()
    t3 = time.perf_counter()
print("%-44s %16.2f %18.2f" % ("torch.distributed all_reduce (nccl)", (t1 - t0) / n * 1e6, (t3 - t2) / m * 1e6))
dist.destroy_process_group()
PYEOF
else
  echo "SKIP torch baseline: no torch with CUDA for $PY"
fi

# ---- 4. multi-rank conformance across JVMs, one GPU per rank ----
if [ "$GPUS" -ge 2 ] && ! command -v mvn >/dev/null 2>&1; then
  say "multi-rank conformance: SKIPPED ($GPUS GPUs, but no Maven on this host to run NcclMultiGpuIT)"
elif [ "$GPUS" -ge 2 ]; then
  say "multi-rank NCCL conformance across JVMs on $GPUS GPUs"
  # the test and its worker JVMs inherit LD_LIBRARY_PATH (libraries) and JCOMM_GPU_COUNT
  JCOMM_GPU_COUNT="$GPUS" mvn -B -pl integration-tests -am verify -Dtest=NoSuchTest -Dsurefire.failIfNoSpecifiedTests=false \
      -Dit.test=NcclMultiGpuIT -Dfailsafe.failIfNoSpecifiedTests=false \
      | tee "$OUT/multi.txt" | grep -E 'Tests run|CONFORMANCE FAIL|ERROR' || true
  grep -q 'Tests run:.*Failures: 0, Errors: 0, Skipped: 0' "$OUT/multi.txt" || { echo "FAIL multi-rank conformance"; status=1; }
else
  say "multi-rank conformance: skipped (1 GPU; NCCL needs one GPU per rank)"
fi

say "summary"
grep -E '^(OK|FAIL) ' "$OUT/java.txt" | sed 's/^/  /' || true
grep -E 'us/call|JavaCPP|NcclCommunicator|^C |torch' "$OUT/java.txt" "$OUT"/c.txt "$OUT"/torch.txt 2>/dev/null | sed 's/^[^:]*://; s/^/  /' || true
[ "$status" -eq 0 ] && echo "gpu-check: PASSED" || echo "gpu-check: FAILED"
exit "$status"
