#!/usr/bin/env bash
# The GPU benchmark and check (issues 22 and 23) in ONE short call on a lent GPU (../shared/gpu/README.md:
# that machine has PyTorch, nvcc, compute-sanitizer and ncu but no Node, no tsx, no network), and its dry
# run here on the SIMT emulator.
#
#   bash scripts/gpu_bench.sh prepare   here: builds the TypeScript, the nvcc addon, the GPU test and
#                                       attention bench binaries, bundles the Node side
#                                       (bench/gpu/harness.ts, esbuild) and packs all into .gpu/
#   bash scripts/gpu_bench.sh           there, with carry [".gpu"]; NF_GPU_BUDGET seconds (default 450):
#                                       a step that would not fit in what is left is skipped, saying so;
#                                       NF_GPU_STEPS (default all: tests,ours,torch,attention,
#                                       sass_density,attention_ncu,attention_sass,profile,kernels,
#                                       memcheck) picks
#                                       steps for a rerun (ours:fp32, ours:checks, ... one
#                                       part of a step);
#                                       NF_ATTENTION_ARGS goes to bench/gpu/attention_run.sh;
#                                       NF_PROFILE_BATCH the profile step's training batch (default 8;
#                                       its profile:infer part times inference at batch 64)
#   bash scripts/gpu_bench.sh --dry     here: the same steps at tiny shapes on the emulator
#                                       (npm run build:cuda:emu first), PyTorch's side only --help'd
#                                       unless torch is importable; proves the script before a GPU is lent
#
# Steps, most informative first, each under its own timeout; $OUT (default /tmp/gpu-out) gets at most
# 8 files, the most a run brings back: tests.log, ours.jsonl, torch.jsonl, gpu_bench.json, report.md,
# attention.md, profile.txt and errors.log (every step's stderr):
#   1. nf_cuda_gpu_tests (the CUDA parity suite, CUDA graphs and the bf16 kernels included), cuBLASLt;
#   2. ours (bench/gpu/harness.ts): every row of the plan (seed-cifar B64, seed-stl10 B16, ViT-B/16 B8
#      and B64 x inference, training x fp32, tf32, bf16) with CUDA graphs on, one process per precision;
#      then the checks: each precision's logits against the CPU's fp32 logits, 300 bf16 training steps
#      against the fp32 loss curve, the bytes a training forward keeps at fp32 and at bf16;
#   3. PyTorch eager on the same card, the same rows (bench/gpu/torch_peer.py: timm's VisionTransformer),
#      and PyTorch's own fp32 and autocast-bf16 loss curves on the check's weights and batches
#      (bench/gpu/torch_curve.py), which the report puts beside ours;
#   4. the report: ms, ratio, MFU per row, the checks (gpu_bench.json, and the table on stdout);
#   5. the attention table (bench/gpu/attention_run.sh with the carried nf_cuda_attention_bench);
#   6. the SASS instructions per mma of the tensor-core attention kernels' streamed-tile loops
#      (cuobjdump of the carried bench binary, scripts/mma_density.py; profile.txt; the PTX count of
#      `check_cuda.sh density` is its CPU-side twin), then ncu (profile.txt): those kernels' detailed
#      sections at a ViT shape, and GPU time per kernel over two eager bf16 ViT-B/16 B8 training steps;
#   7. nf_cuda_gpu_tests with NF_CUBLASLT=0 (the own GEMM kernels), then its bf16 tests under
#      compute-sanitizer memcheck (the 16-byte vector loads and tails), and its attention tests with
#      dQ by atomic adds (NF_CUDA_ATTENTION_DQ=atomic's kernels: their atomics into the fp32 buffer).
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
  # .gpu/ (xz: the carry limit is 64 MiB): node.xz (this machine's Node) and pkg.tar.xz: pkg/ (package.json,
  # the CPU and CUDA addons, detect-libc, the bundled harness), bin/ (the two test and bench binaries),
  # lib/ (libcudart.so.13, a fallback for the card's machine).
  D=.gpu; rm -rf $D; mkdir -p $D
  grep -qx '/.gpu/' "$(git rev-parse --git-path info/exclude)" 2>/dev/null || echo '/.gpu/' >> "$(git rev-parse --git-path info/exclude)"
  xz -T2 -6 -c "$(readlink -f "$(command -v node)")" > $D/node.xz
  tmp=$(mktemp -d); mkdir -p $tmp/pkg/build/Release $tmp/pkg/build/cuda $tmp/pkg/node_modules $tmp/bin $tmp/lib
  cp package.json build/gpu_bench.cjs $tmp/pkg/ && cp build/Release/nodeformer.node $tmp/pkg/build/Release/
  cp build/cuda/nodeformer_cuda.node $tmp/pkg/build/cuda/ && cp -r node_modules/detect-libc $tmp/pkg/node_modules/
  cp build/cuda/nf_cuda_gpu_tests build/cuda/nf_cuda_attention_bench $tmp/bin/
  l=$(ldd build/cuda/nodeformer_cuda.node | awk '/libcudart/ {print $3; exit}'); [ -f "$l" ] && cp -L "$l" $tmp/lib/
  tar cf - -C $tmp pkg bin lib | xz -T2 -6 > $D/pkg.tar.xz && rm -rf $tmp
  du -sh $D
  exit 0
fi

dry=0
[ "${1:-}" = --dry ] && dry=1
budget=${NF_GPU_BUDGET:-450}
steps=",${NF_GPU_STEPS:-tests,ours,torch,attention,sass_density,attention_ncu,attention_sass,profile,kernels,memcheck},"
log=$OUT/tests.log
summary=()
scratch=$(mktemp -d); trap 'rm -rf "$scratch"' EXIT  # the run's temporary files (plan, curves, listings)
export scratch

# step NAME MAX_SECONDS COMMAND...: runs COMMAND under a timeout of MAX_SECONDS or what is left of the
# budget (skipped under 20 s, or when NF_GPU_STEPS names neither NAME nor the part before its colon:
# "ours" runs every ours:... step, "ours:bf16" that one), and notes its status for the summary.
step() {
  local name=$1 max=$2 left; shift 2
  [[ $steps == *",${name%%:*},"* || $steps == *",$name,"* ]] || return 0
  left=$((budget - SECONDS - 5))
  if [ $left -lt 20 ]; then summary+=("$name: skipped (out of time)"); echo "== $name: skipped (out of time)" >> "$log"; return 0; fi
  [ $max -gt $left ] && max=$left
  local t0=$SECONDS rc=0
  timeout -k 5 "$max" bash -c '"$@"' step "$@" || rc=$?
  summary+=("$name: $([ $rc -eq 0 ] && echo pass || echo "FAIL ($rc$([ $rc -eq 124 ] && echo ', timed out'))") in $((SECONDS - t0)) s")
}

if [ $dry = 1 ]; then
  # Here: the checkout's harness through tsx, on the emulated addon.
  export NF_CUDA_BACKEND=emulator
  export NF_CUBLASLT_PATH="$here/build/cuda-emu/emulated/libnf_cublaslt_standin.so"
  hdir=$here hcmd='npx tsx bench/gpu/harness.ts' bin=$here/build/cuda
  echo "== emulator (dry run)" > "$log"
else
  W=/tmp/gpu; mkdir -p $W
  xz -dc "$here/.gpu/node.xz" > $W/node && chmod +x $W/node
  xz -dc "$here/.gpu/pkg.tar.xz" | tar xf - -C $W
  export PATH=$W:$PATH LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$W/lib
  for d in /usr/local/cuda/lib64 /usr/local/cuda-13.0/targets/x86_64-linux/lib; do
    [ -d "$d" ] && export LD_LIBRARY_PATH="$d:$LD_LIBRARY_PATH"
  done
  hdir=$W/pkg hcmd='node gpu_bench.cjs' bin=$W/bin
  echo "== $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1)" > "$log"
fi
export here log hdir hcmd bin OUT
# (steps run under `timeout ... bash -c`, so what they call is an exported function or a command)
gpu_tests() { echo "== nf_cuda_gpu_tests $*${NF_CUBLASLT:+ (NF_CUBLASLT=$NF_CUBLASLT)}" >> "$log"; "$bin/nf_cuda_gpu_tests" "$@" >> "$log" 2>&1; }
export -f gpu_tests
[ $dry = 0 ] && step tests 100 gpu_tests

# The Node side (bench/gpu/harness.ts): from the checkout through tsx here, from the package there.
harness() { (cd "$hdir" && $hcmd "$@"); }
export -f harness
plan=$scratch/plan.json
harness plan $([ $dry = 1 ] && echo --dry) > "$plan"
for p in fp32 tf32 bf16; do step "ours:$p" 70 harness ours "$plan" --precision $p >> "$OUT/ours.jsonl" 2>> "$OUT/errors.log"; done
# (the loss-curve check leaves its starting weights and curves in $curve, for PyTorch's curves)
curve=$scratch/curve; mkdir "$curve"
NF_CURVE_DIR=$curve step ours:checks 90 harness checks "$plan" >> "$OUT/ours.jsonl" 2>> "$OUT/errors.log"
if [ $dry = 1 ] && ! python3 -c 'import torch' 2> /dev/null; then
  step torch 30 python3 "$here/bench/gpu/torch_peer.py" --help >> "$OUT/errors.log" 2>&1
  : > "$OUT/torch.jsonl"
else
  step torch 150 python3 "$here/bench/gpu/torch_peer.py" "$plan" > "$OUT/torch.jsonl" 2>> "$OUT/errors.log"
  # PyTorch's own fp32 and autocast-bf16 curves on the same weights and batches (bench/gpu/torch_curve.py).
  [ -f "$curve/curve.json" ] &&
    step torch:curve 60 python3 "$here/bench/gpu/torch_curve.py" "$curve" --device $([ $dry = 1 ] && echo cpu || echo cuda) \
      >> "$OUT/torch.jsonl" 2>> "$OUT/errors.log"
fi
touch "$OUT/ours.jsonl" "$OUT/torch.jsonl"
steps="$steps,report,"
step report 30 harness report "$plan" "$OUT/ours.jsonl" "$OUT/torch.jsonl" "$OUT/gpu_bench.json" > "$OUT/report.md" 2>> "$OUT/errors.log"

if [ $dry = 0 ]; then
  # The attention table (issue 23): ours against PyTorch's SDPA on the card, with the carried binary.
  export NF_ATTENTION_BENCH="$bin/nf_cuda_attention_bench"
  step attention 180 bash "$here/bench/gpu/attention_run.sh" ${NF_ATTENTION_ARGS:-} > "$OUT/attention.md" 2>> "$OUT/errors.log"
  # Instructions per mma.sync (HMMA) in the flash kernels' streamed-tile loops, from the sm_90 SASS of the
  # carried binary (no dropout; head widths 64 and 128; fp32 and bf16 storage): static and on the
  # shortest path through a tile, by kind (LDSM, LDS/STS, LDGSTS, BAR, integer and address arithmetic).
  sass_density() {
    local sass cuobjdump; sass=$(mktemp -p "$scratch")
    cuobjdump=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
    echo "== SASS instructions per mma (cuobjdump -sass -arch sm_90, scripts/mma_density.py)" >> "$OUT/profile.txt"
    "$cuobjdump" -sass -arch sm_90 "$bin/nf_cuda_attention_bench" > "$sass" &&
      python3 "$here/scripts/mma_density.py" "$sass" --markdown \
        --match '^flash_\w+<\w+, \w+, \w+, (64|128), false(, \w+)?>$' >> "$OUT/profile.txt"
  }
  # The bench's arguments at a ViT shape for ncu: the bf16 kernels on bf16 storage (the layer's), T 197,
  # head 64, one call.
  export vit_args="--precisions bf16 --storage bf16 --T 197 --reps 1 --warmup 0"
  # ncu's detailed sections for the three kernels.
  attention_ncu() {
    echo "== ncu --set detailed: flash kernels, bf16, T 197, head 64" >> "$OUT/profile.txt"
    ncu --set detailed -k regex:'flash_(forward|dkdv|dq)' --launch-skip 1 --launch-count 3 \
      "$bin/nf_cuda_attention_bench" $vit_args >> "$OUT/profile.txt" 2>&1
  }
  # Where the forward kernel's warps stall: ncu's per-SASS-instruction stall samples, the 40 hottest.
  attention_sass() {
    local csv; csv=$(mktemp -p "$scratch")
    local sampled=(ncu --section WarpStateStats --section SourceCounters -k regex:flash_forward --launch-skip 1 --launch-count 1)
    "${sampled[@]}" --page details --print-details all "$bin/nf_cuda_attention_bench" $vit_args 2>&1 |
      grep -vE '^\{' >> "$OUT/profile.txt"
    "${sampled[@]}" --page source --print-source sass --csv "$bin/nf_cuda_attention_bench" $vit_args > "$csv" \
      2>> "$OUT/errors.log"
    python3 - "$csv" >> "$OUT/profile.txt" <<'PY'
import csv, sys
lines = [l for l in open(sys.argv[1]) if l.startswith('"')]
rows = list(csv.reader(lines))
if not rows:
    sys.exit("no source page")
# (the page starts with the kernel's name on a row of its own; the column names follow)
top = next((i for i, r in enumerate(rows) if any(h.startswith("Warp Stall Sampling (All") for h in r)), None)
if top is None:
    sys.exit(f"no stall column in {rows[:3]}")
head, rows = rows[top], rows[top:]
def num(v):
    try:
        return float(v.replace(",", ""))
    except ValueError:
        return 0.0
col = next(i for i, h in enumerate(head) if h.startswith("Warp Stall Sampling (All"))
src = next((i for i, h in enumerate(head) if h == "Source"), 1)
total = sum(num(r[col]) for r in rows[1:])
print(f"== hottest SASS by stall samples (total {total:.0f}):")
idx = sorted(range(1, len(rows)), key=lambda i: -num(rows[i][col]))[:40]
for i in sorted(idx):
    print(f"{i:6d} {num(rows[i][col]):8.0f} {100 * num(rows[i][col]) / max(total, 1):5.1f}%  {rows[i][src][:100]}")
PY
  }
  export -f sass_density attention_ncu attention_sass
  step sass_density 40 sass_density 2>> "$OUT/errors.log"
  step attention_ncu 60 attention_ncu
  step attention_sass 60 attention_sass
  # GPU time per kernel, summed by name, over two eager bf16 ViT-B/16 training steps at batch
  # NF_PROFILE_BATCH (default 8; the second step is the steady state, the first adds one-time casts and
  # cuBLASLt's heuristics); then (profile:infer) over two inference calls at batch 64.
  profile() {
    local csv; csv=$(mktemp -p "$scratch")
    (cd "$hdir" && NF_CUDA_GRAPHS=0 ncu --metrics gpu__time_duration.sum --csv --print-units base \
      --print-kernel-base function $hcmd profile "$1") > "$csv" 2>> "$OUT/errors.log"
    python3 - "$csv" "${NF_PROFILE_BATCH:-8}" "${NF_PROFILE_MODE:-train}" >> "$OUT/profile.txt" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
head, body = rows[0], rows[1:]
name, value = head.index("Kernel Name"), head.index("Metric Value")
total, count = collections.Counter(), collections.Counter()
for r in body:
    total[r[name]] += float(r[value].replace(",", "")) / 1e6
    count[r[name]] += 1
all_ms = sum(total.values())
what = "training steps" if sys.argv[3] == "train" else "inference calls"
print(f"GPU time per kernel over 2 eager bf16 ViT-B/16 B{sys.argv[2]} {what}: {all_ms:.2f} ms in {sum(count.values())} launches")
for k, ms in total.most_common(40):
    print(f"{ms:9.3f} ms {100 * ms / all_ms:5.1f}% {count[k]:5d}x  {k[:110]}")
PY
  }
  export -f profile
  step profile 75 profile "$plan"
  NF_PROFILE_MODE=infer NF_PROFILE_BATCH=64 step profile:infer 60 profile "$plan"
  step kernels 60 env NF_CUBLASLT=0 bash -c gpu_tests
  step memcheck 60 compute-sanitizer --tool memcheck --error-exitcode 3 "$bin/nf_cuda_gpu_tests" bf16 >> "$log" 2>&1
  step memcheck:atomic_dq 60 compute-sanitizer --tool memcheck --error-exitcode 3 "$bin/nf_cuda_gpu_tests" atomic_dq >> "$log" 2>&1
fi

head -1 "$log"
printf '%s\n' "${summary[@]}"
[ -s "$OUT/attention.md" ] && cat "$OUT/attention.md"
[ -s "$OUT/profile.txt" ] && awk '/^== SASS instructions per mma/ { p = 1; print; next } p && /^\|/ { print; next } { p = 0 }' "$OUT/profile.txt"
[ -s "$OUT/profile.txt" ] && grep -E '^  flash_|^    (Duration|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy|Registers Per Thread|Theoretical Occupancy|Dynamic Shared Memory Per Block|Executed Ipc Active|Issue Slots Busy)|GPU time per kernel|^ +[0-9.]+ ms ' "$OUT/profile.txt" | head -70
cat "$OUT/report.md"
