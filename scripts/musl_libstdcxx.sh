#!/usr/bin/env bash
# Builds, for a TEST-ONLY musl environment on a Debian x86-64 machine, the libstdc++.so.6 that a
# program linked on Alpine (Bun for musl, @oven/bun-linux-x64-musl) needs, since neither Debian nor npm
# has Alpine's: the objects of Debian's own libstdc++.a (GCC 12) and libsupc++ that define the C++
# runtime symbols the program takes from it (what `nm -D --undefined-only` lists and Debian's musl
# does not define, plus the C++ ABI vtables it copy-relocates), linked by zig for x86_64-linux-musl
# with zig's libunwind as the unwinder (libgcc_eh finds frames through glibc's _dl_find_object).
# Two glibc symbols those objects use and musl 1.2.3 lacks are defined here: __libc_single_threaded
# (0: never single-threaded, so reference counts always use atomics) and arc4random (from getentropy).
# Run by scripts/install_runtimes.sh; used by test/platform_musl.test.ts with Debian's musl loader.
#   usage: musl_libstdcxx.sh <zig> <program> <out dir>   (writes <out dir>/libstdc++.so.6)
set -euo pipefail
zig=$1 program=$2 out=$3
musl_loader=/lib/ld-musl-x86_64.so.1
libstdcxx=$(g++ -print-file-name=libstdc++.a)
[ -x "$musl_loader" ] || { echo "musl_libstdcxx.sh: no $musl_loader (apt-get install musl)" >&2; exit 1; }
[ -f "$libstdcxx" ] || { echo "musl_libstdcxx.sh: no libstdc++.a (apt-get install g++)" >&2; exit 1; }
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nm -D --defined-only "$musl_loader" | awk '{print $3}' | sort -u > "$tmp/musl"
{ nm -D --undefined-only "$program" | awk '$1 == "U" {print $2}'
  readelf -rW "$program" | awk '$3 == "R_X86_64_COPY" {print $5}'; } | sort -u | comm -23 - "$tmp/musl" > "$tmp/needed"
cat > "$tmp/glibc_shim.c" <<'C'
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
char __libc_single_threaded = 0;
uint32_t arc4random(void) {
  uint32_t v;
  if (getentropy(&v, sizeof v) != 0) abort();
  return v;
}
C
"$zig" cc -target x86_64-linux-musl -O2 -shared -fPIC -Wl,-soname,libstdc++.so.6 -o "$out/libstdc++.so.6" \
  $(sed 's/^/-Wl,-u,/' "$tmp/needed") "$tmp/glibc_shim.c" "$libstdcxx" -lunwind
# Every symbol the program needs must now be defined (musl binds all symbols at load, and would say
# only "symbol not found" there), and the library may need nothing musl lacks.
missing=$(nm -D --defined-only "$out/libstdc++.so.6" | awk '{print $3}' | sort -u | comm -13 - "$tmp/needed")
unresolved=$(nm -D --undefined-only "$out/libstdc++.so.6" | awk '$1 == "U" {print $2}' | sort -u | comm -23 - "$tmp/musl")
if [ -n "$missing$unresolved" ]; then
  echo "musl_libstdcxx.sh: not defined: ${missing//$'\n'/ }; needed from musl but absent: ${unresolved//$'\n'/ }" >&2
  exit 1
fi
echo "musl_libstdcxx.sh: $out/libstdc++.so.6 ($(wc -l < "$tmp/needed") symbols of $(basename "$program"))"
