// GEMM: C = act(alpha * op(A) op(B) + beta * C + bias), row-major, strided-batched.
// Dimension key: op(A) is [M, K], op(B) is [K, N], C is [M, N]; transA/transB mean A is stored
// [K, M] / B is stored [N, K] (so a Linear layer y = x W^T is gemm(transB=true)). lda/ldb/ldc are
// row strides in elements (0 = packed). bias is [N] (one per column), optional. When `preact` is
// given, the value before the activation is written there too (what an activation's backward
// needs). Batches: batch > 1 steps A, B, C (and preact) by strideA/strideB/strideC elements.
#pragma once
#include <cstdint>

#include "../ops/linear.h"
#include "kernel_decl.h"

namespace nf::cpu {

// The GEMM descriptor, its checks and the activations are the op schema's (native/ops/linear.h),
// shared with every backend.
using Act = ops::Act;
using GemmDims = ops::GemmDims;
using ops::gemm_check;

// The gemm op: the public, ISA-dispatched entry point (validates, then runs on the thread pool).
Status run(const ops::Gemm<float>& p);

// One variant per ISA. Expects checked dims. Runs threaded unless called inside a parallel region.
NF_KERNEL_DECL(void gemm(float* C, float* preact, const float* A, const float* B, const float* bias,
                         const GemmDims& d))

}  // namespace nf::cpu
