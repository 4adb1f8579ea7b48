#!/usr/bin/env bash
# Builds libjcommgloo.so, the JNI glue of the gloo backend, during the Maven build
# (cpu-group/gloo/pom.xml runs it in the process-classes phase).
#
# usage: build.sh <jni-headers-dir> <output-dir> <java-home>
#
# Skips (exit 0, with a message) when g++, the gloo headers or libgloo are missing, so that the
# module still builds; the backend then reports "libgloo not found (apt-get install libgloo-dev)".
# Rebuilds only when the source, this script or the generated JNI header changed.
# Overrides: GLOO_INCLUDE (default /usr/include), GLOO_LIBDIR (default: the linker's search path),
# CXX (default g++).
set -euo pipefail
HEADERS=$1
OUT=$2
JHOME=$3
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SRC="$HERE/gloo_jni.cpp"
LIB="$OUT/libjcommgloo.so"
CXX=${CXX:-g++}
GLOO_INCLUDE=${GLOO_INCLUDE:-/usr/include}

skip() {
  echo "[gloo-native] skipping the gloo JNI library: $1 (the gloo backend will report itself unavailable)"
  rm -f "$LIB"
  exit 0
}

case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) ;;
  *) skip "only linux-x86_64 is supported" ;;
esac
command -v "$CXX" >/dev/null 2>&1 || skip "no C++ compiler ($CXX)"
[ -f "$GLOO_INCLUDE/gloo/allreduce.h" ] && [ -f "$GLOO_INCLUDE/gloo/transport/tcp/device.h" ] \
  || skip "gloo headers not found in $GLOO_INCLUDE (apt-get install libgloo-dev)"
LIBFLAGS=()
if [ -n "${GLOO_LIBDIR:-}" ]; then
  LIBFLAGS+=("-L$GLOO_LIBDIR" "-Wl,-rpath,$GLOO_LIBDIR")
  [ -e "$GLOO_LIBDIR/libgloo.so" ] || skip "libgloo.so not found in $GLOO_LIBDIR (apt-get install libgloo-dev)"
elif ! "$CXX" -print-file-name=libgloo.so | grep -q /; then
  skip "libgloo.so not found (apt-get install libgloo-dev)"
fi
HDR="$HEADERS/io_jcomm_cpu_gloo_internal_GlooNative.h"
[ -f "$HDR" ] || { echo "[gloo-native] missing generated JNI header $HDR" >&2; exit 1; }
[ -f "$JHOME/include/jni.h" ] || { echo "[gloo-native] jni.h not found under $JHOME/include" >&2; exit 1; }

if [ -f "$LIB" ] && [ "$LIB" -nt "$SRC" ] && [ "$LIB" -nt "${BASH_SOURCE[0]}" ] && [ "$LIB" -nt "$HDR" ]; then
  echo "[gloo-native] $LIB is up to date"
  exit 0
fi

mkdir -p "$OUT"
echo "[gloo-native] compiling $LIB"
"$CXX" -std=c++17 -O2 -fPIC -shared -Wall -Wextra -Werror -Wno-unused-parameter \
  -fvisibility=hidden -fno-strict-aliasing \
  -I"$HEADERS" -I"$JHOME/include" -I"$JHOME/include/linux" -I"$GLOO_INCLUDE" \
  -o "$LIB.tmp" "$SRC" "${LIBFLAGS[@]}" -lgloo -Wl,--no-undefined -Wl,-z,defs
mv -f "$LIB.tmp" "$LIB"
