// GEMM on the GPU: C = act(alpha * op(A) op(B) + beta * C + bias), row-major, strided-batched, with
// the arguments and semantics of native/cpu/gemm.h (device pointers; queued on the backend's stream).
// Dimension key: op(A) is [M, K], op(B) is [K, N], C is [M, N]; transA/transB mean A is stored
// [K, M] / B is stored [N, K]. lda/ldb/ldc are row strides in elements (0 = packed). bias is [N],
// optional. preact (optional) receives the value before the activation, laid out like C. Batches
// step A, B, C (and preact) by strideA/strideB/strideC elements (0 = the same matrix for all).
#pragma once
#include <cstdint>

#include "../core/status.h"

namespace nf::cuda {

enum class Act : int { none = 0, relu = 1, gelu = 2, gelu_tanh = 3 };  // numbered as nf::cpu::Act

struct GemmDims {
  int64_t M = 0, N = 0, K = 0;
  bool transA = false, transB = false;
  int64_t lda = 0, ldb = 0, ldc = 0;  // 0 = packed (K or M for A, N or K for B, N for C)
  int64_t batch = 1, strideA = 0, strideB = 0, strideC = 0;
  float alpha = 1.0f, beta = 0.0f;
  Act act = Act::none;
};

// Fills the lda/ldb/ldc defaults and checks sizes.
Status gemm_check(GemmDims* d);

Status gemm(float* C, float* preact, const float* A, const float* B, const float* bias, GemmDims d);

}  // namespace nf::cuda
