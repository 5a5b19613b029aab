// The feed-forward network on the GPU, composed of the Linear, bias + activation and dropout ops.
// Math: h = x W1ᵀ + b1; a = dropout(act(h)); y = a W2ᵀ + b2 (+ residual: fc2's C, beta 1).
//   Backward: da = dy W2, dW2 += dyᵀ a, db2 += Σ dy; dh = da ∘ mask/(1−p) ∘ act'(h);
//   dx = dh W1, dW1 += dhᵀ x, db1 += Σ dh. The mask is regenerated from (seed, offset).
// Layout: x, y, dy, dx [rows, D]; h, a [rows, F]; W1 [F, D], b1 [F], W2 [D, F], b2 [D], row-major.
// fc1's bias and activation run in the GEMM's epilogue, which also writes h (cuBLASLt fuses the
// tanh GELU; other activations run as an elementwise pass after the product). Backward computes
// dh = (dy W2) ∘ act'(h) as one product (cuBLASLt's DGELU epilogue for gelu_tanh; the product then
// the elementwise backward otherwise), then applies the dropout mask (the factors commute), and
// db1 rides on the dW1 product; dh lives in scratch slot 2 (the ops it calls use slots 0 and 1).
// Dimension key: rows = B*T, D = model width, F = hidden width.
// Storage: x, h, a, y, dy, dx (and dh) are S (float, or bf16 under precision 'bf16' with W1, W2 the
// master weights' bf16 copies); biases and parameter gradients float (linear.h).
#include "feedforward.h"

#include "common.cuh"
#include "elementwise.h"
#include "linear.h"

namespace nf::cuda {

namespace {

// This backend's own check, after the ones every backend shares (ops::feedforward_check, and the forward's
// ops::feedforward_forward_check, which includes it).
Status check_dropout(const char* op, const FeedForwardDims& d) {
  NF_CHECK(d.dropout < 1.0f, op, "dropout must be in [0, 1)");
  return Status::Ok();
}

// The dropout seed from the step values, when given, as a device pointer the kernel reads.
const double* seed_from(const FeedForwardDims& d) { return d.seed_at >= 0 ? d.values.table + d.seed_at : nullptr; }

template <class S>
Status forward(const ops::FeedForwardForward<S>& p) {
  const FeedForwardDims& d = p.d;
  const Compute mode = compute_of(p.precision);
  NF_TRY(ops::feedforward_forward_check("feedforward_forward", p));
  NF_TRY(check_dropout("feedforward_forward", d));
  if (d.rows == 0) return Status::Ok();
  NF_TRY(cuda::linear_forward(p.a, p.h, p.x, p.W1, p.b1, {d.rows, d.D, d.F}, d.activation, mode, p.b1_rounded));
  if (d.dropout > 0.0f) NF_TRY(dropout(p.a, p.a, d.rows * d.F, d.dropout, d.seed, d.offset, seed_from(d)));
  return linear_forward(p.y, nullptr, p.a, p.W2, p.b2, {d.rows, d.F, d.D}, Act::none, mode, p.b2_rounded, p.residual);
}

template <class S>
Status backward(const ops::FeedForwardBackward<S>& p) {
  const FeedForwardDims& d = p.d;
  const Compute mode = compute_of(p.precision);
  NF_TRY(ops::feedforward_check("feedforward_backward", d));
  NF_TRY(check_dropout("feedforward_backward", d));
  NF_CHECK(p.h && p.a, "feedforward_backward", "needs the pre-activation h and activation a saved by forward");
  if (d.rows == 0) return Status::Ok();
  S* dh = nullptr;
  NF_TRY(workspace_array(2, d.rows * d.F, &dh));
  const LinearDims fc1{d.rows, d.D, d.F}, fc2{d.rows, d.F, d.D};
  NF_TRY(linear_backward_weight(p.dW2, p.db2, p.dy, p.a, fc2, mode));
  NF_TRY(linear_backward_input(dh, p.dy, p.W2, fc2, p.h, d.activation, mode));  // (dy W2) ∘ act'(h)
  if (d.dropout > 0.0f) NF_TRY(dropout(dh, dh, d.rows * d.F, d.dropout, d.seed, d.offset, seed_from(d)));
  return linear_backward(p.dx, p.dW1, p.db1, dh, p.x, p.W1, fc1, mode);
}

}  // namespace

Status run(const ops::FeedForwardForward<float>& p) { return forward(p); }
Status run(const ops::FeedForwardForward<bf16>& p) { return forward(p); }
Status run(const ops::FeedForwardBackward<float>& p) { return backward(p); }
Status run(const ops::FeedForwardBackward<bf16>& p) { return backward(p); }

}  // namespace nf::cuda
