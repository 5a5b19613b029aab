// The feed-forward network on the GPU, composed of the Linear, bias + activation and dropout ops.
// Math: h = x W1ᵀ + b1; a = dropout(act(h)); y = a W2ᵀ + b2.
//   Backward: da = dy W2, dW2 += dyᵀ a, db2 += Σ dy; dh = da ∘ mask/(1−p) ∘ act'(h);
//   dx = dh W1, dW1 += dhᵀ x, db1 += Σ dh. The mask is regenerated from (seed, offset).
// Layout: x, y, dy, dx [rows, D]; h, a [rows, F]; W1 [F, D], b1 [F], W2 [D, F], b2 [D], row-major.
// fc1's bias and activation run in the GEMM epilogue, which also writes h. Backward keeps dh in
// scratch slot 2 (the ops it calls use slots 0 and 1).
// Dimension key: rows = B*T, D = model width, F = hidden width.
#include "feedforward.h"

#include "activation.h"
#include "common.cuh"
#include "elementwise.h"
#include "linear.h"

namespace nf::cuda {

namespace {

Status check(const char* op, const FeedForwardDims& d) {
  NF_CHECK(d.rows >= 0, op, "rows must be non-negative");
  NF_CHECK(d.D >= 1 && d.F >= 1, op, "D and F must be at least 1");
  NF_CHECK(d.dropout >= 0.0f && d.dropout < 1.0f, op, "dropout must be in [0, 1)");
  return Status::Ok();
}

}  // namespace

Status feedforward_forward(float* y, float* h, float* a, const float* x, const float* W1, const float* b1,
                           const float* W2, const float* b2, FeedForwardDims d) {
  NF_TRY(check("feedforward_forward", d));
  if (d.rows == 0) return Status::Ok();
  NF_TRY(cuda::linear_forward(a, h, x, W1, b1, {d.rows, d.D, d.F}, d.activation));
  if (d.dropout > 0.0f) NF_TRY(dropout(a, a, d.rows * d.F, d.dropout, d.seed, d.offset));
  return linear_forward(y, nullptr, a, W2, b2, {d.rows, d.F, d.D});
}

Status feedforward_backward(float* dx, float* dW1, float* db1, float* dW2, float* db2, const float* dy,
                            const float* x, const float* h, const float* a, const float* W1, const float* W2,
                            FeedForwardDims d) {
  NF_TRY(check("feedforward_backward", d));
  if (d.rows == 0) return Status::Ok();
  void* p = nullptr;
  NF_TRY(workspace(2, sizeof(float) * size_t(d.rows * d.F), &p));
  float* dh = static_cast<float*>(p);
  NF_TRY(linear_backward(dh, dW2, db2, dy, a, W2, {d.rows, d.F, d.D}));
  if (d.dropout > 0.0f) NF_TRY(dropout(dh, dh, d.rows * d.F, d.dropout, d.seed, d.offset));
  NF_TRY(bias_act_backward(dh, db1, dh, h, {d.rows, d.F, d.activation}));
  return linear_backward(dx, dW1, nullptr, dh, x, W1, {d.rows, d.D, d.F});
}

}  // namespace nf::cuda
