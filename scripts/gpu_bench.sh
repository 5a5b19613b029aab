#!/usr/bin/env bash
# The GPU benchmark and check (issue 22, item 6) in ONE short call on a lent GPU (../shared/gpu/README.md:
# that machine has PyTorch but no Node, no tsx, no network), and its dry run here on the SIMT emulator.
#
#   bash scripts/gpu_bench.sh prepare   here: builds the TypeScript, the nvcc addon and the GPU test
#                                       binary, bundles the Node side (bench/gpu/harness.ts, esbuild)
#                                       and packs everything into .gpu/ (../shared/gpu/bundle.sh)
#   bash scripts/gpu_bench.sh           there, with carry [".gpu"] (about 5 minutes on an H100)
#   bash scripts/gpu_bench.sh --dry     here: the same steps at tiny shapes on the emulator
#                                       (npm run build:cuda:emu first), PyTorch's side only --help'd
#                                       unless torch is importable; proves the script before a GPU is lent
#
# What the run does (at most ~9.5 minutes: each step has its own timeout, so one run tool call of
# 600 s holds it), the markdown table printed last; $OUT (default /tmp/gpu-out) gets 8 files, the
# most a run brings back: tests.log, plan.json, ours.jsonl, torch.jsonl, gpu_bench.json, report.md,
# attention.md (when there is one) and errors.log (every step's stderr):
#   1. nf_cuda_gpu_tests (the CUDA parity suite, CUDA graphs included) with cuBLASLt, then with
#      NF_CUBLASLT=0 (the own kernels);
#   2. the attention table (bench/gpu/attention_run.sh with the carried nf_cuda_attention_bench);
#   3. ours: every row of the plan (seed-cifar B64, seed-stl10 B16, ViT-B/16 B8 and B64 x inference,
#      training x fp32, tf32, bf16) timed with CUDA graphs on, the logits of each precision against
#      the CPU's fp32 logits, 300 bf16 training steps against the fp32 loss curve (bench/gpu/harness.ts);
#   4. PyTorch eager on the same card, the same rows (bench/gpu/torch_peer.py: timm's VisionTransformer);
#   5. the report: ms, ratio, MFU per row, the checks (gpu_bench.json, and the table on stdout).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
: > "$OUT/errors.log"

if [ "${1:-}" = prepare ]; then
  set -e
  cd "$here"
  npm run build:ts
  npm run build:cuda
  npx esbuild bench/gpu/harness.ts --bundle --platform=node --format=cjs --log-level=warning \
    --external:sharp --external:cli-progress --external:commander --external:onnxruntime-node --outfile=build/gpu_bench.cjs
  extra=(build/gpu_bench.cjs)
  extra+=(build/cuda/nf_cuda_attention_bench)  # built by npm run build:cuda
  ../shared/gpu/bundle.sh ../shared/gpu/unpack.sh build/cuda/nf_cuda_gpu_tests "${extra[@]}"
  exit 0
fi

dry=0
[ "${1:-}" = --dry ] && dry=1
status() { [ "$1" -eq 0 ] && echo pass || echo "FAIL ($1)"; }

if [ $dry = 1 ]; then
  # Here: the checkout's harness through tsx, on the emulated addon.
  export NF_CUDA_BACKEND=emulator
  export NF_CUBLASLT_PATH="$here/build/cuda-emu/emulated/libnf_cublaslt_standin.so"
  hdir=$here hcmd=(npx tsx bench/gpu/harness.ts)
  echo "== emulator (dry run)" > "$OUT/tests.log"
  t1=0 t2=0
else
  eval "$(bash "$here/.gpu/unpack.sh")"
  for d in /usr/local/cuda/lib64 /usr/local/cuda-13.0/targets/x86_64-linux/lib; do
    [ -d "$d" ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"
  done
  cp "$here/.gpu/gpu_bench.cjs" /tmp/gpu/pkg/
  hdir=/tmp/gpu/pkg hcmd=(node gpu_bench.cjs)
  echo "== $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1)" > "$OUT/tests.log"
  echo "== nf_cuda_gpu_tests, cuBLASLt" >> "$OUT/tests.log"
  timeout 120 "$here/.gpu/nf_cuda_gpu_tests" >> "$OUT/tests.log" 2>&1; t1=$?
  echo "== nf_cuda_gpu_tests, NF_CUBLASLT=0" >> "$OUT/tests.log"
  NF_CUBLASLT=0 timeout 90 "$here/.gpu/nf_cuda_gpu_tests" >> "$OUT/tests.log" 2>&1; t2=$?
fi

# The attention table (issue 23): ours against PyTorch's SDPA on the card, with the carried binary
# (the parity suite above already ran the attention tests). Not in the dry run: there is no card.
if [ $dry = 0 ] && [ -x "$here/.gpu/nf_cuda_attention_bench" ]; then
  NF_ATTENTION_BENCH="$here/.gpu/nf_cuda_attention_bench" timeout 90 bash "$here/bench/gpu/attention_run.sh" \
    > "$OUT/attention.md" 2>> "$OUT/errors.log"
fi

# The Node side (bench/gpu/harness.ts): from the checkout through tsx here, from the package there.
harness() { (cd "$hdir" && timeout "$1" "${hcmd[@]}" "${@:2}"); }
plan=$OUT/plan.json
harness 60 plan $([ $dry = 1 ] && echo --dry) > "$plan"
harness 200 ours "$plan" > "$OUT/ours.jsonl" 2>> "$OUT/errors.log"; t3=$?
if [ $dry = 1 ] && ! python3 -c 'import torch' 2> /dev/null; then
  python3 "$here/bench/gpu/torch_peer.py" --help >> "$OUT/errors.log" 2>&1; t4=$?
  : > "$OUT/torch.jsonl"
else
  timeout 170 python3 "$here/bench/gpu/torch_peer.py" "$plan" > "$OUT/torch.jsonl" 2>> "$OUT/errors.log"; t4=$?
fi
harness 60 report "$plan" "$OUT/ours.jsonl" "$OUT/torch.jsonl" "$OUT/gpu_bench.json" > "$OUT/report.md" 2>> "$OUT/errors.log"; t5=$?

head -1 "$OUT/tests.log"
if [ $dry = 1 ]; then echo "parity tests: not run (dry)"; else echo "parity tests, cuBLASLt: $(status $t1)   NF_CUBLASLT=0: $(status $t2)"; fi
echo "ours: $(status $t3)   PyTorch: $(status $t4)$([ $dry = 1 ] && echo ' (--help only without torch)')   report: $(status $t5)"
[ -s "$OUT/attention.md" ] && cat "$OUT/attention.md"
cat "$OUT/report.md"
