// Linear layer on the GPU: y = x Wᵀ + b (W is [out, in]) with an optional fused activation, its
// backward, and the column sums every row-broadcast bias's gradient needs. Arguments and semantics
// as native/cpu/linear.h, on device pointers.
#pragma once
#include <cstdint>

#include "gemm.h"

namespace nf::cuda {

using LinearDims = ops::LinearDims;

// The ops (native/ops/linear.h); the bf16 ones take bf16 x, W (the master weight's bf16 copy), y, dy,
// dx and float b, dW, db.
Status run(const ops::LinearForward<float>& p);
Status run(const ops::LinearForward<ops::bf16>& p);
Status run(const ops::LinearBackward<float>& p);
Status run(const ops::LinearBackward<ops::bf16>& p);

// The building blocks the other layers' kernels run their products through, one overload per
// storage of the activations and the weight: float, or bf16 (precision 'bf16'); b, dW, db float.

// y[rows,out] = act(x[rows,in] W[out,in]ᵀ + b[out]); b optional; preact (optional) receives the
// value before the activation. `mode`: the product's compute mode (gemm.h). b_rounded (optional): b
// in y's type, which a bf16 product's epilogue reads instead of rounding b again (ops/precision.h
// kRoundedBiasDoc; the float overload has b itself). residual (optional, act none, not y): y = x Wᵀ + b
// + residual, the add in the product's epilogue (cuBLASLt's C with beta 1).
Status linear_forward(float* y, float* preact, const float* x, const float* W, const float* b, LinearDims d,
                      Act act = Act::none, Compute mode = Compute::fp32, const float* b_rounded = nullptr,
                      const float* residual = nullptr);
Status linear_forward(bf16* y, bf16* preact, const bf16* x, const bf16* W, const float* b, LinearDims d,
                      Act act = Act::none, Compute mode = Compute::fp32, const bf16* b_rounded = nullptr,
                      const bf16* residual = nullptr);

// dx[rows,in] = dy W (overwritten; skipped when dx is null); dW += dyᵀ x; db += Σ_rows dy (when db).
Status linear_backward(float* dx, float* dW, float* db, const float* dy, const float* x, const float* W,
                       LinearDims d, Compute mode = Compute::fp32);
Status linear_backward(bf16* dx, float* dW, float* db, const bf16* dy, const bf16* x, const bf16* W, LinearDims d,
                       Compute mode = Compute::fp32);

// linear_backward's two halves. The input gradient, times act'(preact) when act is not 'none'
// (the backward of an activation applied to this layer's input: dx = (dy W) ∘ act'(preact), with
// preact [rows, in]; cuBLASLt fuses it for gelu_tanh):
Status linear_backward_input(float* dx, const float* dy, const float* W, LinearDims d, const float* preact = nullptr,
                             Act act = Act::none, Compute mode = Compute::fp32);
Status linear_backward_input(bf16* dx, const bf16* dy, const bf16* W, LinearDims d, const bf16* preact = nullptr,
                             Act act = Act::none, Compute mode = Compute::fp32);
// The parameter gradients: dW += dyᵀ x and db += Σ_rows dy (db optional; one product when cuBLASLt's
// bias-gradient epilogue takes it):
Status linear_backward_weight(float* dW, float* db, const float* dy, const float* x, LinearDims d,
                              Compute mode = Compute::fp32);
Status linear_backward_weight(float* dW, float* db, const bf16* dy, const bf16* x, LinearDims d,
                              Compute mode = Compute::fp32);

// db[n] += Σ_rows dy[row, n] for dy [rows, n]; with x [rows, n] (else null), db[n] += Σ_rows dy · x
// (a per-column scale's gradient). Deterministic: fixed summation order.
Status bias_grad(float* db, const float* dy, int64_t rows, int64_t n, const float* x);
Status bias_grad(float* db, const bf16* dy, int64_t rows, int64_t n, const bf16* x);

}  // namespace nf::cuda
