#!/usr/bin/env bash
# Where a benchmark step's time goes (npm run profile -- <model> <infer|int8|bf16|train|train-bf16> [steps] [threads]).
#
# Runs bench/profile_step.ts (the harness's own inference or training step, random weights) under
# `perf record` and prints the functions with the most samples (self time; kernels inlined into a
# parallel region show up as that region's function). Model building and one warm-up step are
# included in the samples, so give enough steps (default 20) for the steps to dominate.
# Needs Linux perf (Debian: linux-perf) and a built addon. The raw data stays in $PERF_DATA
# (default: a temporary file) for `perf report -i`.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v perf >/dev/null || { echo "profile: perf is not installed (Debian: apt-get install linux-perf)" >&2; exit 2; }
[ $# -ge 2 ] || { echo "usage: npm run profile -- <model> <infer|int8|bf16|train|train-bf16> [steps] [threads]" >&2; exit 2; }
DATA=${PERF_DATA:-$(mktemp -d)/perf.data}
perf record -q -F 2000 -g -o "$DATA" -- node --import tsx bench/profile_step.ts "$@"
perf report -i "$DATA" --no-children --sort dso,symbol -g none --percent-limit 0.5 2>/dev/null |
  grep -v '^#' | grep -v '^$' | sed -E 's/\(anonymous namespace\)::/~::/g; s/ +$//' | cut -c1-150
echo "profile: perf data in $DATA"
