#!/usr/bin/env bash
# Native memory check (npm run check:leaks; not part of npm test, it takes minutes).
#
# Runs test/support/leak_loop.ts — training steps and inference calls of a small ViT through the
# synchronous and the asynchronous API, outputs disposed explicitly or left to the GC finalizers,
# tensors disposed while an asynchronous op still uses them — under valgrind memcheck, and fails
# (exit 1) on any invalid read or write, any use of uninitialised memory outside node's own GC
# (scripts/valgrind-node.supp), or any definitely or indirectly lost block.
#
# Usage: scripts/leak_check.sh [trainSteps inferCalls warmupSteps]   (default 20 40 5)
# Needs valgrind and a built addon (npm run build:native). The log is kept in $LOG
# (default: a temporary file, printed at the end).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "leak_check: valgrind is not installed" >&2; exit 2; }
TRAIN=${1:-20} INFER=${2:-40} WARMUP=${3:-5}
WORK=$(mktemp -d)
LOG=${LOG:-$WORK/valgrind.log}
node -e "require('esbuild').buildSync({ entryPoints: ['test/support/leak_loop.ts'], bundle: true, platform: 'node',
  format: 'cjs', target: 'node20', outfile: '$WORK/leak_loop.js', logLevel: 'error' })"
NF_ADDON_PATH=${NF_ADDON_PATH:-$PWD/build/Release/nodeformer.node}
export NF_ADDON_PATH
echo "leak_check: $TRAIN training steps, $INFER inference calls (after $WARMUP of each) under valgrind; addon $NF_ADDON_PATH"
status=0
valgrind --tool=memcheck --leak-check=full --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect \
  --suppressions=scripts/valgrind-node.supp --error-exitcode=1 --num-callers=40 --log-file="$LOG" \
  node --expose-gc "$WORK/leak_loop.js" "$TRAIN" "$INFER" "$WARMUP" || status=$?
grep -E "definitely lost|indirectly lost|possibly lost|ERROR SUMMARY" "$LOG" | sed 's/^==[0-9]*== */  /'
if grep -q "nodeformer.node" "$LOG"; then
  echo "leak_check: reports involving nodeformer.node:"; grep -B3 -A12 "nodeformer.node" "$LOG" | head -80
fi
echo "leak_check: valgrind log $LOG"
if [ "$status" -ne 0 ]; then echo "leak_check: FAILED (exit $status)"; exit 1; fi
echo "leak_check: OK"
