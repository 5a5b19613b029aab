#!/usr/bin/env bash
# Issue 23's attention table on a lent GPU, in one prepared script: builds the CUDA backend and the
# benchmark (npm run build:cuda), runs the attention parity tests on the card (nf_cuda_gpu_tests, then
# under compute-sanitizer's memcheck and racecheck when it is installed), then nf_cuda_attention_bench
# (ours) and attention_torch.py (PyTorch's SDPA: $NF_BENCH_PYTHON, default python3, with a CUDA build
# of torch) on the same card, and prints the table (bench/gpu/attention_table.py). The test log, the
# JSON lines and the table stay in $OUT (default build/gpu-bench).
#   bash bench/gpu/attention_run.sh [--precisions bf16,tf32,fp32] [--reps N] [--warmup N]
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-build/gpu-bench}"
mkdir -p "$out"
npm run --silent build:cuda
build/cuda/nf_cuda_gpu_tests cuda_attention | tee "$out/attention_tests.txt"
if command -v compute-sanitizer >/dev/null; then
  for tool in memcheck racecheck; do
    compute-sanitizer --tool "$tool" --error-exitcode 1 build/cuda/nf_cuda_gpu_tests cuda_attention_tensor_core \
      | tail -3 | tee -a "$out/attention_tests.txt"
  done
fi
build/cuda/nf_cuda_attention_bench "$@" | tee "$out/attention_ours.jsonl"
"${NF_BENCH_PYTHON:-python3}" bench/gpu/attention_torch.py "$@" | tee "$out/attention_torch.jsonl"
python3 bench/gpu/attention_table.py "$out/attention_ours.jsonl" "$out/attention_torch.jsonl" | tee "$out/attention_table.md"
