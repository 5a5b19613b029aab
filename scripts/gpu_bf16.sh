#!/usr/bin/env bash
# The device check of precision 'bf16' (bfloat16 activations), for a session lent a GPU
# (../shared/gpu/README.md). Prepare here:
#   npm run build:ts && npm run build:cuda &&
#   ../shared/gpu/bundle.sh ../shared/gpu/unpack.sh build/cuda/nf_cuda_gpu_tests scripts/gpu_bf16_check.cjs
# then run `bash scripts/gpu_bf16.sh` there with carry [".gpu"] (a few minutes on an H100). It runs,
# writing logs to $OUT:
#   1. the bf16 parity tests (nf_cuda_gpu_tests bf16: every bf16 kernel against the float64
#      reference) with cuBLASLt (CUDA_R_16BF operands) and with NF_CUBLASLT=0 (the own kernel);
#   2. compute-sanitizer memcheck on them;
#   3. scripts/gpu_bf16_check.cjs: seed-cifar B64 logits at bf16 against the CPU at fp32, 300 AdamW
#      steps at bf16 tracking the fp32 loss curve (the issue's 2%), the bytes a training forward keeps
#      and the median step at each precision, on the same card in the same call,
# and prints a short table last.
set -u
eval "$(bash .gpu/unpack.sh)"
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
for d in /usr/local/cuda/lib64 /usr/local/cuda-13.0/targets/x86_64-linux/lib; do
  [ -d "$d" ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"
done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1

status() { [ "$1" -eq 0 ] && echo pass || echo "FAIL ($1)"; }
timeout 120 .gpu/nf_cuda_gpu_tests bf16 > "$OUT/bf16_tests_cublaslt.log" 2>&1; t1=$?
NF_CUBLASLT=0 timeout 120 .gpu/nf_cuda_gpu_tests bf16 > "$OUT/bf16_tests_kernel.log" 2>&1; t2=$?
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 .gpu/nf_cuda_gpu_tests bf16 > "$OUT/bf16_sanitizer.log" 2>&1; t3=$?

cp .gpu/gpu_bf16_check.cjs /tmp/gpu/pkg/
cd /tmp/gpu/pkg
timeout 300 node gpu_bf16_check.cjs 300 > "$OUT/bf16_check.json" 2> "$OUT/bf16_check.err"; t4=$?

echo "== $(cat "$OUT/gpu.txt")"
echo "bf16 parity tests, cuBLASLt:      $(status $t1)"
echo "bf16 parity tests, NF_CUBLASLT=0: $(status $t2)"
echo "compute-sanitizer (bf16 tests):   $(status $t3)"
echo "seed-cifar B64 check:             $(status $t4)"
[ $t4 -eq 0 ] && node -e 'const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  console.log(`logits vs cpu fp32: fp32 ${r.logits.fp32.toExponential(2)} (< 1e-4), bf16 ${r.logits.bf16.toExponential(2)} (< 3e-2)`);
  console.log(`${r.steps} steps: final loss fp32 ${r.final.fp32.toFixed(4)}, bf16 ${r.final.bf16.toFixed(4)}; largest curve difference ${(100 * r.worstCurveDiff).toFixed(2)}% (< 2%)`);
  console.log(`training forward keeps: fp32 ${r.bytes.fp32} B, bf16 ${r.bytes.bf16} B (ratio ${(r.bytes.bf16 / r.bytes.fp32).toFixed(3)})`);
  console.log(`median step ms: fp32 ${r.ms.fp32.toFixed(2)}, bf16 ${r.ms.bf16.toFixed(2)}`);' "$OUT/bf16_check.json"
