#!/usr/bin/env bash
# Cross-compiles the CPU addon for linux-arm64 (glibc) on an x86-64 Linux machine:
#   scripts/cross/linux-arm64.sh [OUT]     -> build-cross/linux-arm64/nodeformer.node (and a copy at OUT)
# with Debian's g++-aarch64-linux-gnu (apt-get install g++-aarch64-linux-gnu), or the compiler in
# $NF_CROSS_CXX (a path; for zig, a wrapper script that runs `zig c++ -target aarch64-linux-gnu`).
# It configures CMakeLists.txt with scripts/cross/linux-arm64.cmake in build-cross/linux-arm64 (not
# under build/, which `node-gyp rebuild` empties) and builds the `nodeformer` target only (kernels
# scalar + neon; no CUDA).
# test/platform_arm64.test.ts runs the result under qemu (test/support/arm64.ts).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cxx="${NF_CROSS_CXX:-aarch64-linux-gnu-g++}"
if ! command -v "$cxx" >/dev/null 2>&1; then
  echo "linux-arm64: no cross compiler '$cxx' (apt-get install g++-aarch64-linux-gnu, or set NF_CROSS_CXX)" >&2
  exit 2
fi
dir="$root/build-cross/linux-arm64"
cmake -S "$root" -B "$dir" -DCMAKE_TOOLCHAIN_FILE="$root/scripts/cross/linux-arm64.cmake" \
  -DCMAKE_CXX_COMPILER="$(command -v "$cxx")" -DCMAKE_BUILD_TYPE=Release -DNF_CUDA=OFF >/dev/null
cmake --build "$dir" --target nodeformer -j "${NF_CROSS_JOBS:-2}"
if [ $# -gt 0 ]; then
  mkdir -p "$(dirname "$1")"
  cp "$dir/nodeformer.node" "$1"
fi
echo "linux-arm64: $dir/nodeformer.node"
