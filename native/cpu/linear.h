// Linear layer: y = x Wᵀ + b (PyTorch layout, W is [out, in]), with an optional fused activation.
#pragma once
#include <cstdint>

#include "gemm.h"

namespace nf::cpu {

// rows = B*T (every leading dimension flattened), in and out features (native/ops/linear.h).
using LinearDims = ops::LinearDims;

// The linearForward op: y[rows,out] = act(x[rows,in] W[out,in]ᵀ + b[out]); b optional; preact
// (optional) receives the value before the activation; WPacked (optional) is W prepacked.
Status run(const ops::LinearForward<float>& p);

// The linearBackward op: dx[rows,in] = dy W (overwritten; skipped when dx is null); dW += dyᵀ x;
// db += Σ_rows dy (when db).
Status run(const ops::LinearBackward<float>& p);

// The same with bf16 activations (precision 'bf16'): x, y, preact, dy, dx and W (the weight's bf16
// copy) bf16 storage, b, dW, db float32.
Status run(const ops::LinearForward<ops::bf16>& p);
Status run(const ops::LinearBackward<ops::bf16>& p);

// The variants below are the building blocks other kernels (attention, the feed-forward network,
// the patch embedding) run their products through.

// With `Wp` (W prepacked for this variant and precision), W is not read. `precision`: that of the
// products (the GEMM's; the backward's dx and dW products too). round_out: y rounded to bfloat16
// as it is stored (gemm's). bf16: x, W, y, preact (and in the backward dy, dx, act_grad) are bf16
// storage (GemmStorage: precision 'bf16' with bf16 activations); b, dW, db stay float.
NF_KERNEL_DECL(void linear_forward(float* y, float* preact, const float* x, const float* W, const float* b,
                                   const LinearDims& d, Act act, const PackedB& Wp = {},
                                   ops::Precision precision = ops::Precision::fp32, bool round_out = false,
                                   bool bf16 = false))
// act_grad (optional, [rows, in]): where x = act(act_grad), dx ∘= act'(act_grad), the gradient carried
// on through the activation in dx's GEMM epilogue (gemm's act_grad) instead of a pass over dx after it.
NF_KERNEL_DECL(void linear_backward(float* dx, float* dW, float* db, const float* dy, const float* x,
                                    const float* W, const LinearDims& d,
                                    ops::Precision precision = ops::Precision::fp32,
                                    const float* act_grad = nullptr, Act act = Act::none, bool bf16 = false))
// db[n] += Σ_rows dy[row, n] for dy [rows, n]: the bias gradient of any row-broadcast bias; with x
// [rows, n] (else null), db[n] += Σ_rows dy[row, n] · x[row, n]: a per-column scale's gradient.
// bf16: dy and x are bf16 storage.
NF_KERNEL_DECL(void bias_grad(float* db, const float* dy, int64_t rows, int64_t n, const float* x, bool bf16 = false))

}  // namespace nf::cpu
