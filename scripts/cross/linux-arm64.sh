#!/usr/bin/env bash
# Cross-compiles the CPU addon for linux-arm64 (glibc) on an x86-64 Linux machine:
#   scripts/cross/linux-arm64.sh [OUT]     (OUT defaults to build/linux-arm64/nodeformer.node)
# with Debian's g++-aarch64-linux-gnu (apt-get install g++-aarch64-linux-gnu), or the compiler in
# $NF_CROSS_CXX (a path; for zig, a wrapper script that runs `zig c++ -target aarch64-linux-gnu`).
# It configures CMakeLists.txt with scripts/cross/linux-arm64.cmake in build/cross-linux-arm64 and
# builds the `nodeformer` target only (kernels scalar + neon; no CUDA), then copies the addon to OUT.
# test/platform_arm64.test.ts runs the result under qemu (scripts/cross/run-arm64.sh).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:-$root/build/linux-arm64/nodeformer.node}"
cxx="${NF_CROSS_CXX:-aarch64-linux-gnu-g++}"
if ! command -v "$cxx" >/dev/null 2>&1; then
  echo "linux-arm64: no cross compiler '$cxx' (apt-get install g++-aarch64-linux-gnu, or set NF_CROSS_CXX)" >&2
  exit 2
fi
dir="$root/build/cross-linux-arm64"
cmake -S "$root" -B "$dir" -DCMAKE_TOOLCHAIN_FILE="$root/scripts/cross/linux-arm64.cmake" \
  -DCMAKE_CXX_COMPILER="$(command -v "$cxx")" -DCMAKE_BUILD_TYPE=Release -DNF_CUDA=OFF >/dev/null
cmake --build "$dir" --target nodeformer -j "${NF_CROSS_JOBS:-2}"
mkdir -p "$(dirname "$out")"
cp "$dir/nodeformer.node" "$out"
echo "linux-arm64: $out"
