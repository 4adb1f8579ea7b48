#!/usr/bin/env bash
# Builds libjcommcopy.so, the optional copy routine of the tcp backend's shared-memory paths, during the
# Maven build (cpu-group/core/pom.xml runs it in the process-classes phase).
#
# usage: build.sh <jni-headers-dir> <output-dir> <java-home>
#
# Skips (exit 0, with a message) on other platforms than linux-x86_64 or without a C compiler; the
# backend then copies with Java (NativeCopy.availability() says why). Rebuilds only when the source,
# this script or the generated JNI header changed. Override the compiler with CC (default: cc, gcc, g++).
set -euo pipefail
HEADERS=$1
OUT=$2
JHOME=$3
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SRC="$HERE/copy.c"
LIB="$OUT/libjcommcopy.so"

skip() {
  echo "[copy-native] skipping the native copy library: $1 (the tcp backend copies with Java)"
  rm -f "$LIB"
  exit 0
}

case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) ;;
  *) skip "only linux-x86_64 is supported" ;;
esac
CC_FLAGS=()
if [ -n "${CC:-}" ]; then
  command -v "$CC" >/dev/null 2>&1 || skip "no C compiler ($CC)"
else
  for c in cc gcc g++; do
    if command -v "$c" >/dev/null 2>&1; then CC=$c; break; fi
  done
  [ -n "${CC:-}" ] || skip "no C compiler (cc, gcc or g++)"
fi
case "$CC" in *++*) CC_FLAGS+=(-x c++) ;; *) CC_FLAGS+=(-std=c11) ;; esac
HDR="$HEADERS/io_jcomm_cpu_internal_NativeCopy.h"
[ -f "$HDR" ] || { echo "[copy-native] missing generated JNI header $HDR" >&2; exit 1; }
[ -f "$JHOME/include/jni.h" ] || { echo "[copy-native] jni.h not found under $JHOME/include" >&2; exit 1; }

if [ -f "$LIB" ] && [ "$LIB" -nt "$SRC" ] && [ "$LIB" -nt "${BASH_SOURCE[0]}" ] && [ "$LIB" -nt "$HDR" ]; then
  echo "[copy-native] $LIB is up to date"
  exit 0
fi

mkdir -p "$OUT"
echo "[copy-native] compiling $LIB with $CC"
"$CC" "${CC_FLAGS[@]}" -O2 -fPIC -shared -Wall -Wextra -Werror -fvisibility=hidden \
  -I"$HEADERS" -I"$JHOME/include" -I"$JHOME/include/linux" \
  -o "$LIB.tmp" "$SRC" -Wl,--no-undefined -Wl,-z,defs
mv -f "$LIB.tmp" "$LIB"
