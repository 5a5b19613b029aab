#!/usr/bin/env bash
# Issue 23's attention table on a lent GPU: nf_cuda_attention_bench (ours, CUDA events) and
# attention_torch.py (PyTorch's SDPA: $NF_BENCH_PYTHON, default python3, with a CUDA build of torch)
# on the same card, then the table (bench/gpu/attention_table.py) on stdout; the JSON lines stay in
# $ATTENTION_OUT (default: a temporary folder). scripts/gpu_bench.sh calls it with the carried binary
# (NF_ATTENTION_BENCH=.gpu/nf_cuda_attention_bench) after running the parity suite itself; run alone in
# a checkout (nvcc there), it builds the binary first (npm run build:cuda) and, with --tests first,
# runs the attention parity tests (plus compute-sanitizer's memcheck and racecheck when installed).
#   bash bench/gpu/attention_run.sh [--tests] [--precisions bf16,tf32,fp32] [--T 65,197,1024,4096] [--reps N] [--warmup N]
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${ATTENTION_OUT:-$(mktemp -d)}"
bench="${NF_ATTENTION_BENCH:-build/cuda/nf_cuda_attention_bench}"
tests=0
[ "${1:-}" = --tests ] && { tests=1; shift; }
[ -x "$bench" ] || npm run --silent build:cuda >&2
if [ $tests = 1 ]; then
  build/cuda/nf_cuda_gpu_tests cuda_attention >&2
  if command -v compute-sanitizer >/dev/null; then
    for tool in memcheck racecheck; do
      compute-sanitizer --tool "$tool" --error-exitcode 1 build/cuda/nf_cuda_gpu_tests cuda_attention_tensor_core | tail -3 >&2
    done
  fi
fi
"$bench" "$@" > "$out/attention_ours.jsonl"
"$bench" "$@" --storage bf16 >> "$out/attention_ours.jsonl"  # bf16 tensors, as the layer under precision 'bf16'

"${NF_BENCH_PYTHON:-python3}" bench/gpu/attention_torch.py "$@" > "$out/attention_torch.jsonl"
python3 bench/gpu/attention_table.py "$out/attention_ours.jsonl" "$out/attention_torch.jsonl"
