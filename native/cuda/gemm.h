// GEMM on the GPU: C = act(alpha * op(A) op(B) + beta * C + bias), row-major, strided-batched, with
// the arguments and semantics of native/cpu/gemm.h (device pointers; queued on the backend's stream).
// Dimension key: op(A) is [M, K], op(B) is [K, N], C is [M, N]; transA/transB mean A is stored
// [K, M] / B is stored [N, K]. lda/ldb/ldc are row strides in elements (0 = packed). bias is [N],
// optional. preact (optional) receives the value before the activation, laid out like C. Batches
// step A, B, C (and preact) by strideA/strideB/strideC elements (0 = the same matrix for all).
#pragma once
#include <cstdint>

#include "../core/status.h"
#include "../ops/linear.h"  // the GEMM descriptor and the gemm op

namespace nf::cuda {

using Act = ops::Act;
using GemmDims = ops::GemmDims;

// Fills the lda/ldb/ldc defaults and checks sizes (ops::gemm_check, then the CUDA grid's limits).
Status gemm_check(GemmDims* d);

// The building block of every product in the backend.
Status gemm(float* C, float* preact, const float* A, const float* B, const float* bias, GemmDims d);

// The gemm op.
Status run(const ops::Gemm<float>& p);

}  // namespace nf::cuda
