// GEMM: C = act(alpha * op(A) op(B) + beta * C + bias), row-major, strided-batched.
// Dimension key: op(A) is [M, K], op(B) is [K, N], C is [M, N]; transA/transB mean A is stored
// [K, M] / B is stored [N, K] (so a Linear layer y = x W^T is gemm(transB=true)). lda/ldb/ldc are
// row strides in elements (0 = packed). bias is [N] (one per column), optional. When `preact` is
// given, the value before the activation is written there too (what an activation's backward
// needs). Batches: batch > 1 steps A, B, C (and preact) by strideA/strideB/strideC elements.
#pragma once
#include <cstdint>

#include "kernel_decl.h"

namespace nf::cpu {

enum class Act : int { none = 0, relu = 1, gelu = 2, gelu_tanh = 3 };

struct GemmDims {
  int64_t M = 0, N = 0, K = 0;
  bool transA = false, transB = false;
  int64_t lda = 0, ldb = 0, ldc = 0;  // 0 = packed (K or M for A, N or K for B, N for C)
  int64_t batch = 1, strideA = 0, strideB = 0, strideC = 0;
  float alpha = 1.0f, beta = 0.0f;
  Act act = Act::none;
};

// Fills lda/ldb/ldc defaults; checks sizes. Call before gemm_variant-level code. Inline: the CUDA
// backend runs the same checks before its own grid limits.
inline Status gemm_check(GemmDims* d) {
  NF_CHECK(d->M >= 0 && d->N >= 0 && d->K >= 0, "gemm", "M, N and K must be non-negative");
  NF_CHECK(d->batch >= 1, "gemm", "batch must be at least 1");
  if (d->lda == 0) d->lda = d->transA ? d->M : d->K;
  if (d->ldb == 0) d->ldb = d->transB ? d->K : d->N;
  if (d->ldc == 0) d->ldc = d->N;
  NF_CHECK(d->lda >= (d->transA ? d->M : d->K), "gemm", "lda is smaller than a row of A");
  NF_CHECK(d->ldb >= (d->transB ? d->K : d->N), "gemm", "ldb is smaller than a row of B");
  NF_CHECK(d->ldc >= d->N, "gemm", "ldc is smaller than a row of C");
  return Status::Ok();
}

// The public, ISA-dispatched entry point (validates, then runs on the thread pool).
Status gemm(float* C, float* preact, const float* A, const float* B, const float* bias, GemmDims d);

// One variant per ISA. Expects checked dims. Runs threaded unless called inside a parallel region.
NF_KERNEL_DECL(void gemm(float* C, float* preact, const float* A, const float* B, const float* bias,
                         const GemmDims& d))

}  // namespace nf::cpu
