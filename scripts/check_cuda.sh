#!/usr/bin/env bash
# Compiles every native/cuda/*.cu, and the kernels only the tests launch (native/cuda/tests/*.cu), with
# nvcc for sm_80, sm_89 and sm_90 (plus PTX), all three from compute_80's PTX as CMakeLists.txt builds them,
# with warnings as errors, and checks ptxas's resource report (-Xptxas -v) against the budgets below:
# no kernel may spill or use a stack frame, and each kernel's registers and static shared memory
# must stay within its budget. The report is written to native/cuda/ptxas-report.txt (kept in the
# repository, so a change in a kernel's resources shows in review). Exits non-zero on any failure.
#   npm run check:cuda            (nvcc from $NVCC, PATH, $CUDA_PATH/bin or /usr/local/cuda/bin)
#   NF_PTXAS_REPORT=FILE writes the report there instead (the test suite does, to leave the tree clean).
#   NF_CUDA_JOBS=N compiles N files at a time (default: one per CPU; 197 s on a 2-core Xeon, nvcc 13).
#   bash scripts/check_cuda.sh density [--markdown]
#                                 instead: the instructions per mma.sync of the tensor-core attention
#                                 kernels' streamed-tile loops in their sm_90 PTX (scripts/mma_density.py;
#                                 no dropout, head widths 64 and 128, fp32 and bf16 storage), the count
#                                 native/cuda/PERFORMANCE.md records; on a GPU machine gpu_bench.sh counts SASS
# Dynamic shared memory is sized at launch and checked there (and by the emulator's limits).
set -euo pipefail
cd "$(dirname "$0")/.."

# The tensor-core kernels must reach the tensor cores: the PTX (compute_80) of each file below
# must contain each instruction named after it (mma.sync for bf16 and tf32, ldmatrix, cp.async).
TENSOR_CORE_PTX='
flash_attention_forward.cu   mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 ldmatrix.sync.aligned.m8n8.x4.shared.b16 ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 cp.async.cg.shared.global
flash_attention_backward.cu  mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 ldmatrix.sync.aligned.m8n8.x4.shared.b16 ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 cp.async.cg.shared.global
'

# kernel (demangled, no namespace or parameters)   registers   static shared memory (bytes)
# Budgets sit at or a little over what nvcc 13 gives today; most equal the register cap the kernel's
# __launch_bounds__ sets for its blocks per SM (e.g. 128 / 85 for the GEMM tiles at 2 / 3 blocks of 256
# threads, 96 / 128 for attention at 5 / 4 blocks of 128), where going over would mean spilling.
# A line starting with # in the list gives the reason for the budgets below it (no apostrophes: the
# list is one single-quoted string).
BUDGETS='
# Kernels templated on the storage of the activations (float, or bf16 under precision bf16: native/cuda/bf16.cuh)
# have one budget per instantiation; the bf16 LayerNorm backward holds the conversions of its bf16 loads too
# (LayerNorm: the second parameter is the columns a lane takes per step, 8 for 16-byte bf16 vectors)
# (the forward holds the columns of a lane in a row up to D 1024 in registers: 32 floats at W 1, 4 chunks of 8 at W 8,
# and as many of the residual while the first loads are in flight)
layernorm_forward_kernel<float, 1>            128  0
layernorm_forward_kernel<nf::ops::bf16, 1>    152  0
layernorm_forward_kernel<nf::ops::bf16, 8>    88   0
# layernorm_backward_kernel<S, W, K, T>: T threads per row (32, a warp, up to D 1024; 256, the block, above),
# each holding K chunks of W columns of a row (x then xhat, dout then dout gamma) and their dgamma, dbeta sums
# in registers: about 4 K W registers plus addresses. No cap from __launch_bounds__ (a cap of 128 for two
# blocks per SM spills at K W = 24 on sm_90); sm_80 and sm_89 give 128 at K W = 24, sm_90 up to 184, and
# K W = 32 (fp32 or unaligned bf16 at D 769 to 1024) takes 169 to 255 with no spill
layernorm_backward_kernel<float, 1, 4, 32>             48   0
layernorm_backward_kernel<float, 1, 8, 32>             72   0
layernorm_backward_kernel<float, 1, 16, 32>            136  0
layernorm_backward_kernel<float, 1, 24, 32>            192  0
layernorm_backward_kernel<float, 1, 32, 32>            255  0
layernorm_backward_kernel<float, 1, 24, 256>           192  0
layernorm_backward_kernel<nf::ops::bf16, 1, 4, 32>     48   0
layernorm_backward_kernel<nf::ops::bf16, 1, 8, 32>     72   0
layernorm_backward_kernel<nf::ops::bf16, 1, 16, 32>    136  0
layernorm_backward_kernel<nf::ops::bf16, 1, 24, 32>    192  0
layernorm_backward_kernel<nf::ops::bf16, 1, 32, 32>    255  0
layernorm_backward_kernel<nf::ops::bf16, 1, 24, 256>   192  0
layernorm_backward_kernel<nf::ops::bf16, 8, 1, 32>     72   0
layernorm_backward_kernel<nf::ops::bf16, 8, 2, 32>     112  0
layernorm_backward_kernel<nf::ops::bf16, 8, 3, 32>     136  0
layernorm_backward_kernel<nf::ops::bf16, 8, 4, 32>     176  0
layernorm_backward_kernel<nf::ops::bf16, 8, 3, 256>    144  0
# layernorm_param_grad_kernel: 8 warps a block, their 32 column sums met in 1 KB of shared memory
layernorm_param_grad_kernel              40   1024
# gemm_kernel<tile, TA, TC>: A, B of TA and C of TC (gemm.h GemmCallOf), converted to float on load
gemm_kernel<64, 64, 16, 4, 4, float, float>                  85   17408
gemm_kernel<64, 64, 16, 4, 4, nf::ops::bf16, float>          85   17408
gemm_kernel<64, 64, 16, 4, 4, nf::ops::bf16, nf::ops::bf16>  85   17408
gemm_kernel<128, 128, 8, 8, 8, float, float>                 128  16896
gemm_kernel<128, 128, 8, 8, 8, nf::ops::bf16, float>         128  16896
gemm_kernel<128, 128, 8, 8, 8, nf::ops::bf16, nf::ops::bf16> 128  16896
gemm_splitk_reduce_kernel<float, float>                      40   0
gemm_splitk_reduce_kernel<nf::ops::bf16, float>              40   0
gemm_splitk_reduce_kernel<nf::ops::bf16, nf::ops::bf16>      40   0
column_sum_kernel<float>                 40   1056
column_sum_kernel<nf::ops::bf16>         40   1056
add_chunks_kernel                        40   0
bias_act_forward_kernel<float>           40   0
bias_act_forward_kernel<nf::ops::bf16>   40   0
# bias + activation backward: two 16-byte packs (dy, preact) in flight, the loop inlined twice (with_act: GELU
# as a constant, the rest by a switch): 48, still 5 blocks of 256 a SM
bias_act_backward_kernel<float>          48   0
bias_act_backward_kernel<nf::ops::bf16>  48   0
ce_targets_kernel                        40   128
ce_row_kernel<float>                     40   128
ce_row_kernel<nf::ops::bf16>             40   128
ce_mean_kernel                           40   256
# adamw_multi_kernel<C> (the multi-tensor AdamW, C the type of the weight copy it writes: float or bf16): the
# step factors (double pow, from arguments or step values) at the top of each block, then 4 elements of 4 arrays
# per 16-byte vector step and a scalar tail; its table of 36 tensors and 320 blocks is a kernel argument
# (about 3.4 KB of the 4 KB of parameter space, in constant bank 0); the bf16 copy rounded by cvt.rn.bf16x2
# (2026-11-28: 40 registers with the integer rounding, 44-45 with the instruction, as many as the float kernel)
adamw_multi_kernel<float>                44   0
adamw_multi_kernel<nf::ops::bf16>        45   0
# attention_weights_kernel, attention_di_kernel: templated on the storage of q, k (dO, O): float or bf16;
# attention_di_kernel also on the elements a lane loads at a time (a 16-byte vector, or 1)
attention_weights_kernel<float>          72   0
attention_weights_kernel<nf::ops::bf16>  72   0
attention_di_kernel<float, 1>            80   0
attention_di_kernel<float, 4>            80   0
attention_di_kernel<nf::ops::bf16, 1>    80   0
attention_di_kernel<nf::ops::bf16, 8>    80   0
add_kernel<float>                        40   0
add_kernel<nf::ops::bf16>                40   0
channel_scale_kernel<float>              40   0
channel_scale_kernel<nf::ops::bf16>      40   0
# dropout_kernel: Philox per element in the 16-byte vector loop and in the tail loop, and the seed read from
# the step values when a CUDA graph replays it (seed_from); 53 for float on sm_80, no spill (memory-bound)
dropout_kernel<float>                    56   0
dropout_kernel<nf::ops::bf16>            48   0
copy_rows_kernel<float>                  40   0
copy_rows_kernel<nf::ops::bf16>          40   0
check_ids_kernel                         40   128
embedding_forward_kernel                 40   0
embedding_scatter_kernel                 40   0
position_grad_kernel                     40   0
cls_pos_forward_kernel<float>            40   0
cls_pos_forward_kernel<nf::ops::bf16>    40   0
cls_pos_backward_kernel<float>           48   0
cls_pos_backward_kernel<nf::ops::bf16>   48   0
# sinusoidal_kernel: double pow and sinpi/cospi per element (no local memory, see embedding.cu)
sinusoidal_kernel                        40   0
# token_pos_forward_kernel: a grid-stride add of two rows, as cls_pos_forward_kernel
token_pos_forward_kernel                 40   0
im2col_kernel<float>                     40   0
im2col_kernel<nf::ops::bf16>             40   0
col2im_kernel<float>                     40   0
col2im_kernel<nf::ops::bf16>             40   0
sgd_kernel                               40   0
sum_squares_partial_kernel               40   256
sum_partials_kernel                      40   256
scale_kernel<float>                      40   0
scale_kernel<nf::ops::bf16>              40   0
# clip_norm_kernel: the double block reduction of sum_partials_kernel (32 doubles of shared memory), then sqrt
clip_norm_kernel                         40   256
# clip_scale_kernel: scale_kernel reading its factor from device memory
clip_scale_kernel                        40   0
# clip_coefficient_kernel: one thread adding the per-tensor sums in order (double), then sqrt
clip_coefficient_kernel                  40   0
# first_nonfinite_*: grid-stride scan, then block min-reductions of int64 positions (32 of them shared)
first_nonfinite_partial_kernel           40   256
first_nonfinite_index_kernel             40   256
mse_count_kernel                         40   256
mse_partial_kernel                       40   256
mse_mean_kernel                          40   256
softmax_kernel                           40   128
topk_kernel                              40   256
# The last template argument of the flash kernels: attention dropout compiled in (true) or not (false).
# flash_forward_kernel (flash_attention_forward.cu, the attention core at every precision): 4 warps of two 16-row
# blocks, each block with a 16 x DP fp32 output (DP/2 registers at head width DP) and a 16 x R score tile
# (R/2), plus operand fragments and running max and sum: up to the 255 that __launch_bounds__(128, 2)
# allows (2 CTAs per SM); shared memory is dynamic (Q tile and the K, V stream, sized at launch, at most
# 99 KB, the sm_89 limit)
flash_forward_kernel<nf::cuda::flash::Bf16Mma, float, float, 32, false> 255  0
flash_forward_kernel<nf::cuda::flash::Bf16Mma, float, float, 32, true> 255  0
flash_forward_kernel<nf::cuda::flash::Bf16Mma, float, float, 64, false> 255  0
flash_forward_kernel<nf::cuda::flash::Bf16Mma, float, float, 64, true> 255  0
flash_forward_kernel<nf::cuda::flash::Bf16Mma, float, float, 96, false> 255  0
flash_forward_kernel<nf::cuda::flash::Bf16Mma, float, float, 96, true> 255  0
flash_forward_kernel<nf::cuda::flash::Bf16Mma, float, float, 128, false> 255  0
flash_forward_kernel<nf::cuda::flash::Bf16Mma, float, float, 128, true> 255  0
flash_forward_kernel<nf::cuda::flash::Tf32Mma, float, float, 32, false> 255  0
flash_forward_kernel<nf::cuda::flash::Tf32Mma, float, float, 32, true> 255  0
flash_forward_kernel<nf::cuda::flash::Tf32Mma, float, float, 64, false> 255  0
flash_forward_kernel<nf::cuda::flash::Tf32Mma, float, float, 64, true> 255  0
flash_forward_kernel<nf::cuda::flash::Tf32Mma, float, float, 96, false> 255  0
flash_forward_kernel<nf::cuda::flash::Tf32Mma, float, float, 96, true> 255  0
flash_forward_kernel<nf::cuda::flash::Tf32Mma, float, float, 128, false> 255  0
flash_forward_kernel<nf::cuda::flash::Tf32Mma, float, float, 128, true> 255  0
# flash_forward_kernel at precision fp32 (Fp32Mma, 3xTF32): the tf32 kernel with fragments of big and small halves (twice the operand registers)
flash_forward_kernel<nf::cuda::flash::Fp32Mma, float, float, 32, false> 255  0
flash_forward_kernel<nf::cuda::flash::Fp32Mma, float, float, 32, true> 255  0
flash_forward_kernel<nf::cuda::flash::Fp32Mma, float, float, 64, false> 255  0
flash_forward_kernel<nf::cuda::flash::Fp32Mma, float, float, 64, true> 255  0
flash_forward_kernel<nf::cuda::flash::Fp32Mma, float, float, 96, false> 255  0
flash_forward_kernel<nf::cuda::flash::Fp32Mma, float, float, 96, true> 255  0
flash_forward_kernel<nf::cuda::flash::Fp32Mma, float, float, 128, false> 255  0
flash_forward_kernel<nf::cuda::flash::Fp32Mma, float, float, 128, true> 255  0
# flash_forward_kernel on bf16 storage (the attention layer at precision bf16: S = O = bfloat16 bits, operand tiles copied straight
# from global memory, outputs rounded to bf16): the same registers as on float storage, same budget
flash_forward_kernel<nf::cuda::flash::Bf16Mma, unsigned short, unsigned short, 32, false> 255  0
flash_forward_kernel<nf::cuda::flash::Bf16Mma, unsigned short, unsigned short, 32, true> 255  0
flash_forward_kernel<nf::cuda::flash::Bf16Mma, unsigned short, unsigned short, 64, false> 255  0
flash_forward_kernel<nf::cuda::flash::Bf16Mma, unsigned short, unsigned short, 64, true> 255  0
flash_forward_kernel<nf::cuda::flash::Bf16Mma, unsigned short, unsigned short, 96, false> 255  0
flash_forward_kernel<nf::cuda::flash::Bf16Mma, unsigned short, unsigned short, 96, true> 255  0
flash_forward_kernel<nf::cuda::flash::Bf16Mma, unsigned short, unsigned short, 128, false> 255  0
flash_forward_kernel<nf::cuda::flash::Bf16Mma, unsigned short, unsigned short, 128, true> 255  0
# flash_dkdv_kernel (flash_attention_backward.cu): two 16 x DP fp32 accumulators (dK and dV, DP registers)
# plus the 16 x R tiles of S and dP (R): up to the 255 of 2 CTAs per SM (at DP 128 R is 16 to stay there)
flash_dkdv_kernel<nf::cuda::flash::Bf16Mma, float, float, 32, false, false> 255  0
flash_dkdv_kernel<nf::cuda::flash::Bf16Mma, float, float, 32, true, false> 255  0
flash_dkdv_kernel<nf::cuda::flash::Bf16Mma, float, float, 64, false, false> 255  0
flash_dkdv_kernel<nf::cuda::flash::Bf16Mma, float, float, 64, true, false> 255  0
flash_dkdv_kernel<nf::cuda::flash::Bf16Mma, float, float, 96, false, false> 255  0
flash_dkdv_kernel<nf::cuda::flash::Bf16Mma, float, float, 96, true, false> 255  0
flash_dkdv_kernel<nf::cuda::flash::Bf16Mma, float, float, 128, false, false> 255  0
flash_dkdv_kernel<nf::cuda::flash::Bf16Mma, float, float, 128, true, false> 255  0
flash_dkdv_kernel<nf::cuda::flash::Tf32Mma, float, float, 32, false, false> 255  0
flash_dkdv_kernel<nf::cuda::flash::Tf32Mma, float, float, 32, true, false> 255  0
flash_dkdv_kernel<nf::cuda::flash::Tf32Mma, float, float, 64, false, false> 255  0
flash_dkdv_kernel<nf::cuda::flash::Tf32Mma, float, float, 64, true, false> 255  0
flash_dkdv_kernel<nf::cuda::flash::Tf32Mma, float, float, 96, false, false> 255  0
flash_dkdv_kernel<nf::cuda::flash::Tf32Mma, float, float, 96, true, false> 255  0
flash_dkdv_kernel<nf::cuda::flash::Tf32Mma, float, float, 128, false, false> 255  0
flash_dkdv_kernel<nf::cuda::flash::Tf32Mma, float, float, 128, true, false> 255  0
# flash_dkdv_kernel at precision fp32 (Fp32Mma, 3xTF32): the tf32 kernel with fragments of big and small halves (twice the operand registers)
flash_dkdv_kernel<nf::cuda::flash::Fp32Mma, float, float, 32, false, false> 255  0
flash_dkdv_kernel<nf::cuda::flash::Fp32Mma, float, float, 32, true, false> 255  0
flash_dkdv_kernel<nf::cuda::flash::Fp32Mma, float, float, 64, false, false> 255  0
flash_dkdv_kernel<nf::cuda::flash::Fp32Mma, float, float, 64, true, false> 255  0
flash_dkdv_kernel<nf::cuda::flash::Fp32Mma, float, float, 96, false, false> 255  0
flash_dkdv_kernel<nf::cuda::flash::Fp32Mma, float, float, 96, true, false> 255  0
flash_dkdv_kernel<nf::cuda::flash::Fp32Mma, float, float, 128, false, false> 255  0
flash_dkdv_kernel<nf::cuda::flash::Fp32Mma, float, float, 128, true, false> 255  0
# flash_dkdv_kernel on bf16 storage: as on float storage
flash_dkdv_kernel<nf::cuda::flash::Bf16Mma, unsigned short, unsigned short, 32, false, false> 255  0
flash_dkdv_kernel<nf::cuda::flash::Bf16Mma, unsigned short, unsigned short, 32, true, false> 255  0
flash_dkdv_kernel<nf::cuda::flash::Bf16Mma, unsigned short, unsigned short, 64, false, false> 255  0
flash_dkdv_kernel<nf::cuda::flash::Bf16Mma, unsigned short, unsigned short, 64, true, false> 255  0
flash_dkdv_kernel<nf::cuda::flash::Bf16Mma, unsigned short, unsigned short, 96, false, false> 255  0
flash_dkdv_kernel<nf::cuda::flash::Bf16Mma, unsigned short, unsigned short, 96, true, false> 255  0
flash_dkdv_kernel<nf::cuda::flash::Bf16Mma, unsigned short, unsigned short, 128, false, false> 255  0
flash_dkdv_kernel<nf::cuda::flash::Bf16Mma, unsigned short, unsigned short, 128, true, false> 255  0
# flash_dkdv_kernel with atomic dQ (NF_CUDA_ATTENTION_DQ=atomic; flash_attention_dq_atomic.cu): dS K in 16 x 32 units after the dK and dV products
# (16 more accumulators while S and dP are dead); without dropout only, and not for fp32 storage with tf32 operands at DP 128 (its dS tile does not fit)
flash_dkdv_kernel<nf::cuda::flash::Bf16Mma, float, float, 32, false, true> 255  0
flash_dkdv_kernel<nf::cuda::flash::Bf16Mma, float, float, 64, false, true> 255  0
flash_dkdv_kernel<nf::cuda::flash::Bf16Mma, float, float, 96, false, true> 255  0
flash_dkdv_kernel<nf::cuda::flash::Bf16Mma, float, float, 128, false, true> 255  0
flash_dkdv_kernel<nf::cuda::flash::Tf32Mma, float, float, 32, false, true> 255  0
flash_dkdv_kernel<nf::cuda::flash::Tf32Mma, float, float, 64, false, true> 255  0
flash_dkdv_kernel<nf::cuda::flash::Tf32Mma, float, float, 96, false, true> 255  0
flash_dkdv_kernel<nf::cuda::flash::Fp32Mma, float, float, 32, false, true> 255  0
flash_dkdv_kernel<nf::cuda::flash::Fp32Mma, float, float, 64, false, true> 255  0
flash_dkdv_kernel<nf::cuda::flash::Fp32Mma, float, float, 96, false, true> 255  0
flash_dkdv_kernel<nf::cuda::flash::Bf16Mma, unsigned short, unsigned short, 32, false, true> 255  0
flash_dkdv_kernel<nf::cuda::flash::Bf16Mma, unsigned short, unsigned short, 64, false, true> 255  0
flash_dkdv_kernel<nf::cuda::flash::Bf16Mma, unsigned short, unsigned short, 96, false, true> 255  0
flash_dkdv_kernel<nf::cuda::flash::Bf16Mma, unsigned short, unsigned short, 128, false, true> 255  0
# flash_dq_store_kernel (atomic dQ): dq = scale acc_dq, one element a thread
flash_dq_store_kernel<float>                 40   0
flash_dq_store_kernel<unsigned short>        40   0
# flash_dq_kernel: one 16 x DP accumulator (dQ) and the 16 x R tiles of S and dP (about 200), 2 CTAs per SM;
# at head width 64 with dropout compiled in, the Philox state too: 224 on sm_80 and sm_89 (under the 255 of 2 CTAs)
flash_dq_kernel<nf::cuda::flash::Bf16Mma, float, float, 32, false>   208  0
flash_dq_kernel<nf::cuda::flash::Bf16Mma, float, float, 32, true>    208  0
flash_dq_kernel<nf::cuda::flash::Bf16Mma, float, float, 64, false>   208  0
flash_dq_kernel<nf::cuda::flash::Bf16Mma, float, float, 64, true>    224  0
flash_dq_kernel<nf::cuda::flash::Bf16Mma, float, float, 96, false>   208  0
flash_dq_kernel<nf::cuda::flash::Bf16Mma, float, float, 96, true>    208  0
flash_dq_kernel<nf::cuda::flash::Bf16Mma, float, float, 128, false>  208  0
flash_dq_kernel<nf::cuda::flash::Bf16Mma, float, float, 128, true>   208  0
flash_dq_kernel<nf::cuda::flash::Tf32Mma, float, float, 32, false>   208  0
flash_dq_kernel<nf::cuda::flash::Tf32Mma, float, float, 32, true>    208  0
flash_dq_kernel<nf::cuda::flash::Tf32Mma, float, float, 64, false>   208  0
flash_dq_kernel<nf::cuda::flash::Tf32Mma, float, float, 64, true>    208  0
flash_dq_kernel<nf::cuda::flash::Tf32Mma, float, float, 96, false>   208  0
flash_dq_kernel<nf::cuda::flash::Tf32Mma, float, float, 96, true>    208  0
flash_dq_kernel<nf::cuda::flash::Tf32Mma, float, float, 128, false>  208  0
flash_dq_kernel<nf::cuda::flash::Tf32Mma, float, float, 128, true>   208  0
# flash_dq_kernel at precision fp32 (Fp32Mma, 3xTF32): the tf32 kernel with fragments of big and small halves (twice the operand registers)
flash_dq_kernel<nf::cuda::flash::Fp32Mma, float, float, 32, false>   208  0
flash_dq_kernel<nf::cuda::flash::Fp32Mma, float, float, 32, true>    208  0
flash_dq_kernel<nf::cuda::flash::Fp32Mma, float, float, 64, false>   208  0
flash_dq_kernel<nf::cuda::flash::Fp32Mma, float, float, 64, true>    208  0
flash_dq_kernel<nf::cuda::flash::Fp32Mma, float, float, 96, false>   208  0
flash_dq_kernel<nf::cuda::flash::Fp32Mma, float, float, 96, true>    208  0
flash_dq_kernel<nf::cuda::flash::Fp32Mma, float, float, 128, false>  208  0
flash_dq_kernel<nf::cuda::flash::Fp32Mma, float, float, 128, true>   208  0
# flash_dq_kernel on bf16 storage: as on float storage
flash_dq_kernel<nf::cuda::flash::Bf16Mma, unsigned short, unsigned short, 32, false> 208  0
flash_dq_kernel<nf::cuda::flash::Bf16Mma, unsigned short, unsigned short, 32, true> 208  0
flash_dq_kernel<nf::cuda::flash::Bf16Mma, unsigned short, unsigned short, 64, false> 208  0
flash_dq_kernel<nf::cuda::flash::Bf16Mma, unsigned short, unsigned short, 64, true> 224  0
flash_dq_kernel<nf::cuda::flash::Bf16Mma, unsigned short, unsigned short, 96, false> 208  0
flash_dq_kernel<nf::cuda::flash::Bf16Mma, unsigned short, unsigned short, 96, true> 208  0
flash_dq_kernel<nf::cuda::flash::Bf16Mma, unsigned short, unsigned short, 128, false> 208  0
flash_dq_kernel<nf::cuda::flash::Bf16Mma, unsigned short, unsigned short, 128, true> 208  0
# Test kernels (native/cuda/tests/mma_kernels.cu, launched by the tests only): one warp running one
# warp-level matrix instruction (mma, ldmatrix through 33 staged shared rows, cp.async of 480 floats)
# or the cvt conversions, and a 64x64-tile bf16 GEMM of 128 threads (32 fp32 accumulators each, A and
# B k-tiles double-buffered in shared memory: 2 x (64 x 24 + 16 x 72) bf16)
mma_m16n8k16_kernel<false>               40   0
mma_m16n8k16_kernel<true>                40   0
mma_m16n8k8_tf32_kernel                  40   0
ldmatrix_kernel<1, false>                40   1056
ldmatrix_kernel<1, true>                 40   1056
ldmatrix_kernel<2, false>                40   1056
ldmatrix_kernel<2, true>                 40   1056
ldmatrix_kernel<4, false>                40   1056
ldmatrix_kernel<4, true>                 40   1056
cp_async_kernel                          48   1920
convert_kernel                           40   0
mma_gemm_bf16_kernel                     80   10752
# convert_kernel<D, S>: float <-> bf16 arrays (native/cuda/bf16.cu), four elements per step
convert_kernel<float, nf::ops::bf16>     40   0
convert_kernel<nf::ops::bf16, float>     40   0
'

NVCC="${NVCC:-$(command -v nvcc || true)}"
for candidate in "${CUDA_PATH:-}/bin/nvcc" /usr/local/cuda/bin/nvcc; do
  [ -n "$NVCC" ] || { [ -x "$candidate" ] && NVCC="$candidate"; } || true
done
if [ -z "$NVCC" ]; then
  echo "check_cuda: nvcc not found (set NVCC or CUDA_PATH)" >&2
  exit 2
fi

# nvcc --ptx (for `arch`) of each native/cuda file named, all at once, into dir/<file>.ptx; exits on a failure.
ptx_all() {
  local arch="$1" dir="$2" cu pid pids=()
  shift 2
  for cu in "$@"; do
    "$NVCC" -std=c++17 -O3 -arch="$arch" --ptx "native/cuda/$cu" -o "$dir/$cu.ptx" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || { echo "check_cuda: nvcc --ptx failed" >&2; exit 1; }; done
}

if [ "${1:-}" = density ]; then
  dir="$(mktemp -d)"
  trap 'rm -rf "$dir"' EXIT
  ptx_all sm_90 "$dir" flash_attention_forward.cu flash_attention_backward.cu flash_attention_dq_atomic.cu
  exec python3 scripts/mma_density.py "$dir"/*.ptx --match '^flash_\w+<\w+, \w+, \w+, (64|128), false(, \w+)?>$' "${@:2}"
fi

report=${NF_PTXAS_REPORT:-native/cuda/ptxas-report.txt}
log="$(mktemp)"
trap 'rm -rf "$log" "$log.d"' EXIT
mkdir "$log.d"
start=$(date +%s)
# The files compile NF_CUDA_JOBS at a time (default: one per CPU), the largest first (the slowest to
# compile: so that no long file starts last), each into its own object, log and PTX (kept from nvcc's
# intermediate files, for the tensor-core check below) in $log.d.
compile_one() {
  local cu="$1" name
  name="$(basename "$cu")"
  mkdir "$log.d/$name.keep"
  "$NVCC" -std=c++17 -O3 --threads 2 \
    -gencode arch=compute_80,code='[sm_80,sm_89,sm_90,compute_80]' \
    -Werror all-warnings -Xcompiler -Wall,-Wextra,-Wno-unused-parameter,-Werror -Xptxas -v \
    --keep --keep-dir "$log.d/$name.keep" -c "$cu" -o "$log.d/$name.o" 2>&1 | sed "s|^|$name |" >"$log.d/$name.log" || {
    grep -v 'ptxas info' "$log.d/$name.log" >&2
    echo "check_cuda: $cu does not compile cleanly" >&2
    return 255  # (xargs stops at the first failure)
  }
  mv "$log.d/$name.keep/${name%.cu}.ptx" "$log.d/$name.ptx"
  rm -rf "$log.d/$name.keep"
}
export -f compile_one
export NVCC log
ls -S native/cuda/*.cu native/cuda/tests/*.cu | xargs -P "${NF_CUDA_JOBS:-$(nproc)}" -n 1 bash -o pipefail -c 'compile_one "$0"' || exit 1
cat "$log.d"/*.log >"$log"

while read -r file instructions; do
  [ -n "$file" ] || continue
  for instruction in $instructions; do
    grep -qF "$instruction" "$log.d/$file.ptx" || {
      echo "check_cuda: the PTX of native/cuda/$file has no $instruction" >&2
      exit 1
    }
  done
  echo "check_cuda: the PTX of native/cuda/$file has $(grep -cE '^\s*mma\.sync' "$log.d/$file.ptx") mma.sync ($instructions)"
done <<<"$TENSOR_CORE_PTX"

# One row per (kernel, arch): file kernel arch registers spill-stores spill-loads stack smem.
rows="$(awk '
  /Compiling entry function/ { file = $1; split($0, q, "\047"); name = q[2]; arch = q[4]; next }
  /bytes stack frame/ { stack = $2; ss = $6; sl = $10; next }
  /Used [0-9]+ registers/ {
    regs = 0; smem = 0
    for (i = 2; i <= NF; i++) {
      if ($i == "Used") regs = $(i + 1)
      if ($i ~ /^smem/ && $(i - 1) == "bytes") smem = $(i - 2)
    }
    print file, name, arch, regs, ss, sl, stack, smem
  }
' "$log")"
demangled="$(while read -r file name rest; do
  short="$(echo "$name" | c++filt | sed -E 's/^void //; s/^nf::cuda::\(anonymous namespace\):://; s/\(.*$//')"
  printf '%s\t%s\t%s\n' "$file" "$short" "$rest"
done <<<"$rows" | sort -t$'\t' -k1,1 -k2,2 -k3,3)"

failures=0
{
  echo "# ptxas resource usage of the CUDA backend's kernels (scripts/check_cuda.sh; do not edit)"
  echo "# $("$NVCC" --version | tail -1)"
  printf '%-20s %-34s %-6s %5s %6s %6s %6s %7s %s\n' file kernel arch regs spillS spillL stack smem budget
  while IFS=$'\t' read -r file kernel rest; do
    read -r arch regs ss sl stack smem <<<"$rest"
    budget="$(echo "$BUDGETS" | awk -v k="$kernel" '{ name = $0; sub(/[ ]+[0-9]+[ ]+[0-9]+$/, "", name) } name == k { print $(NF-1), $NF }')"
    verdict="ok"
    if [ -z "$budget" ]; then
      verdict="NO BUDGET"
    else
      read -r breg bsmem <<<"$budget"
      [ "$regs" -le "$breg" ] || verdict="OVER: registers > $breg"
      [ "$smem" -le "$bsmem" ] || verdict="OVER: smem > $bsmem"
      [ "$ss" -eq 0 ] && [ "$sl" -eq 0 ] && [ "$stack" -eq 0 ] || verdict="SPILLS"
      verdict="$verdict ($breg regs, $bsmem B)"
    fi
    case "$verdict" in ok*) ;; *) failures=$((failures + 1)) ;; esac
    printf '%-20s %-34s %-6s %5s %6s %6s %6s %7s %s\n' "$file" "$kernel" "$arch" "$regs" "$ss" "$sl" "$stack" "$smem" "$verdict"
  done <<<"$demangled"
} >"$report"
seconds=$(( $(date +%s) - start ))
if [ "$failures" -gt 0 ]; then
  grep -vE ' ok \(' "$report" | grep -v '^#' >&2
  echo "check_cuda: $failures kernel build(s) over budget or spilling; see $report ($seconds s)" >&2
  exit 1
fi
echo "check_cuda: $(grep -c ' ok (' "$report") kernel builds within budget, no spills; wrote $report ($seconds s)"
