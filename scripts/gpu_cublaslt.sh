#!/usr/bin/env bash
# The device check of the cuBLASLt GEMM path, for a session lent a GPU (../shared/gpu/README.md).
# Prepare here:  npm run build:ts && npm run build:cuda &&
#                ../shared/gpu/bundle.sh ../shared/gpu/unpack.sh build/cuda/nf_cuda_gpu_tests scripts/gpu_step_time.cjs
# then run `bash scripts/gpu_cublaslt.sh` there with carry [".gpu"] (about 5 minutes on an H100).
# It runs, writing logs to $OUT:
#   1. the parity tests (nf_cuda_gpu_tests) with the products on cuBLASLt (the toolkit's
#      libcublasLt.so.13), then with NF_CUBLASLT=0 (the own kernel): both must pass;
#   2. compute-sanitizer memcheck on the GEMM and Linear tests through cuBLASLt;
#   3. ViTClassifier training steps (seed B64, ViT-B/16 B64) timed with cuBLASLt and with
#      NF_CUBLASLT=0, in the same call on the same card,
# and prints a short table last.
set -u
eval "$(bash .gpu/unpack.sh)"
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
# The toolkit's cuBLASLt, wherever this machine keeps it (the loader also looks beside libcudart).
for d in /usr/local/cuda/lib64 /usr/local/cuda-13.0/targets/x86_64-linux/lib; do
  [ -d "$d" ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"
done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1

status() { [ "$1" -eq 0 ] && echo pass || echo "FAIL ($1)"; }
timeout 240 .gpu/nf_cuda_gpu_tests > "$OUT/tests_cublaslt.log" 2>&1; t1=$?
NF_CUBLASLT=0 timeout 240 .gpu/nf_cuda_gpu_tests > "$OUT/tests_kernel.log" 2>&1; t2=$?
{ timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 .gpu/nf_cuda_gpu_tests gemm &&
  timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 .gpu/nf_cuda_gpu_tests linear; } > "$OUT/sanitizer.log" 2>&1; t3=$?

cp .gpu/gpu_step_time.cjs /tmp/gpu/pkg/
cd /tmp/gpu/pkg
: > "$OUT/steps.jsonl"
for model in seed vit-b16; do
  for mode in cublaslt kernel; do
    if [ $mode = kernel ]; then export NF_CUBLASLT=0; else unset NF_CUBLASLT; fi
    timeout 150 node gpu_step_time.cjs $model 64 20 >> "$OUT/steps.jsonl" 2>> "$OUT/steps.err" || echo "{\"model\":\"$model\",\"failed\":\"$mode\"}" >> "$OUT/steps.jsonl"
  done
done
unset NF_CUBLASLT

echo "== $(cat "$OUT/gpu.txt")"
echo "parity tests, cuBLASLt:         $(status $t1)  $(grep -m1 'gemm backend' "$OUT/tests_cublaslt.log")"
echo "parity tests, NF_CUBLASLT=0:    $(status $t2)"
echo "compute-sanitizer (gemm, linear): $(status $t3)"
echo "model    batch  backend   median ms"
node -e 'for (const l of require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n")) { const r = JSON.parse(l);
  console.log(r.failed ? `${r.model} FAILED (${r.failed})` : `${r.model.padEnd(8)} ${String(r.batch).padEnd(6)} ${r.gemm.backend.padEnd(9)} ${r.medianMs.toFixed(2)}`); }' "$OUT/steps.jsonl"
