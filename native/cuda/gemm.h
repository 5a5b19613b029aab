// GEMM on the GPU: C = act(alpha * op(A) op(B) + beta * C + bias), row-major, strided-batched, with
// the arguments and semantics of native/cpu/gemm.h (device pointers; queued on the backend's stream).
// Dimension key: op(A) is [M, K], op(B) is [K, N], C is [M, N]; transA/transB mean A is stored
// [K, M] / B is stored [N, K]. lda/ldb/ldc are row strides in elements (0 = packed). bias is [N],
// optional. preact (optional) receives the value before the activation, laid out like C. Batches
// step A, B, C (and preact) by strideA/strideB/strideC elements (0 = the same matrix for all).
//
// Every product of the backend goes through one dispatch, gemm(const GemmCall&): cuBLASLt (loaded
// at run time, cublaslt.h) when the library is there and takes the product, with the bias, the
// activation, the pre-activation output, the activation's backward and the bias gradient fused in
// its epilogue where cuBLASLt has one (llm.c's recipe); else the same product through cuBLASLt plus
// the backend's small elementwise kernels; else the backend's own kernel (gemm.cu), which is also
// the reference the tests hold the others to.
#pragma once
#include <cstdint>
#include <string>

#include "../core/status.h"
#include "../ops/linear.h"  // the GEMM descriptor and the gemm op
#include "cublaslt.h"
#include "../ops/schema.h"

namespace nf::cuda {

using Act = ops::Act;
using GemmDims = ops::GemmDims;
using ops::bf16;

// How a product's multiplies run (DESIGN.md: precision is a module property; the same meaning on
// every device; statistics, losses and optimizer state stay fp32 whatever the mode):
//   fp32  exact float32 multiply-add (CUBLAS_COMPUTE_32F; the backend's own kernel).
//   tf32  inputs rounded to TF32 (10-bit mantissa) for the tensor cores, float32 accumulation
//         (CUBLAS_COMPUTE_32F_FAST_TF32).
//   bf16  inputs rounded to bfloat16 (7-bit mantissa), float32 accumulation: float32 operands
//         through CUBLAS_COMPUTE_32F_FAST_16BF; bf16 operands (GemmCallOf<bf16, ...>, precision
//         'bf16''s activations) are bf16 already and take CUBLAS_COMPUTE_32F.
// Only cuBLASLt honours tf32 and bf16; the backend's own kernel computes every mode in fp32.
enum class Compute { fp32, tf32, bf16 };
const char* compute_name(Compute mode);

// The mode an op runs its products in: its `precision` field (native/ops/precision.h, the module
// property the layers pass down), fp32 by default.
inline constexpr Compute compute_of(ops::Precision p) {
  return p == ops::Precision::tf32 ? Compute::tf32 : p == ops::Precision::bf16 ? Compute::bf16 : Compute::fp32;
}

// One product and what rides on it. Forward: C = act(alpha op(A) op(B) + beta C + bias), preact
// receiving the value before act (the fields of gemm() below). Backward extras, each optional:
//   dact_input: C = (alpha op(A) op(B)) ∘ act'(dact_input) with act = dact (an activation's backward
//     fused into the product that yields its output gradient; dact_input laid out like C; needs
//     beta = 0, no bias, d.act none).
//   dbias: dbias[m] += Σ_k op(A)[m, k] (the bias gradient that rides on a Linear's weight-gradient
//     product dW = dyᵀ x: op(A) = dyᵀ; needs transA, A packed, batch 1).
// Storage: A and B are TA, C, preact and dact_input TC; bias and dbias float. <float, float> is every
// fp32 product; precision 'bf16' runs <bf16, bf16> (bf16 activations and the bf16 weight copy in, a
// bf16 activation out) and <bf16, float> (a weight gradient accumulated into its fp32 master's
// gradient), with float accumulation (CUBLAS_COMPUTE_32F over CUDA_R_16BF operands; the own kernel
// converts on load).
template <class TA, class TC>
struct GemmCallOf {
  GemmDims d;
  TC* C = nullptr;
  const TC* C_in = nullptr;  // beta's C read from here instead of C (laid out as C, packed; C then only written)
  const TA* A = nullptr;
  const TA* B = nullptr;
  const float* bias = nullptr;
  const TC* bias_rounded = nullptr;  // bias in C's type, for a bf16 C's epilogue (null: rounded per call)
  TC* preact = nullptr;
  const TC* dact_input = nullptr;
  Act dact = Act::none;
  float* dbias = nullptr;
  Compute mode = Compute::fp32;
};
using GemmCall = GemmCallOf<float, float>;

// Fills the lda/ldb/ldc defaults and checks sizes (ops::gemm_check, then the CUDA grid's limits).
Status gemm_check(GemmDims* d);

// The dispatch: the building block of every product in the backend (TA, TC: float, float; bf16, bf16;
// bf16, float).
template <class TA, class TC>
Status gemm(const GemmCallOf<TA, TC>& call);

// gemm() for a forward product (bias_rounded, C_in: GemmCallOf's).
template <class TA, class TC>
Status gemm(TC* C, TC* preact, const TA* A, const TA* B, const float* bias, GemmDims d, Compute mode = Compute::fp32,
            const TC* bias_rounded = nullptr, const TC* C_in = nullptr) {
  GemmCallOf<TA, TC> c;
  c.d = d, c.C = C, c.preact = preact, c.A = A, c.B = B, c.bias = bias, c.bias_rounded = bias_rounded, c.mode = mode;
  c.C_in = C_in;
  return gemm(c);
}
inline Status gemm(float* C, float* preact, const float* A, const float* B, const float* bias, GemmDims d,
                   Compute mode = Compute::fp32) {
  return gemm<float, float>(C, preact, A, B, bias, d, mode);
}

// The backend's own kernel alone (what the dispatch falls back to; the tests' reference).
template <class TA, class TC>
Status gemm_kernel_only(TC* C, TC* preact, const TA* A, const TA* B, const float* bias, GemmDims d);

// The gemm op.
Status run(const ops::Gemm<float>& p);

// Which GEMM backend runs the products, and how many ran where (backendInfo()'s `gemm`): cuBLASLt's
// own state and counters (when it is loaded it runs them; lt::Info) and the products our kernel ran.
struct GemmBackendInfo {
  lt::Info cublaslt;
  int64_t kernel = 0;  // products run by the backend's own kernel
};
GemmBackendInfo gemm_backend_info();

}  // namespace nf::cuda
