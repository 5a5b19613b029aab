// Reference feed-forward network: the Linear references plus plain loops for dropout and the
// activation, double accumulators, templated on the storage type. The math is in
// native/ops/feedforward.h and reference/torch_reference.py's FeedForward.
#pragma once
#include <cstdint>
#include <vector>

#include "../../core/philox.h"
#include "../../ops/feedforward.h"
#include "activation.h"
#include "linear.h"

namespace nf::ref {

// Dropout's multiplier for stream element i: 0 when dropped, 1/(1-p) when kept.
inline double dropout_factor(uint64_t seed, uint64_t offset, int64_t i, float p) {
  if (p <= 0.0f) return 1.0;
  return dropout_keep(seed, offset, static_cast<uint64_t>(i), p) ? 1.0 / (1.0 - double(p)) : 0.0;
}

// y = fc2(dropout(act(x W1ᵀ + b1))) (+ residual); saves h (pre-activation, optional) and a (the fc2 input).
template <class T>
void run(const ops::FeedForwardForward<T>& p) {
  const ops::FeedForwardDims d = ops::with_step_values(p.d);
  const int64_t rows = d.rows, D = d.D, F = d.F;
  gemm<T>(p.a, p.h, p.x, p.W1, p.b1, rows, F, D, false, true, 1.0, 0.0, d.activation);
  for (int64_t i = 0; i < rows * F; ++i) p.a[i] = static_cast<T>(p.a[i] * dropout_factor(d.seed, d.offset, i, d.dropout));
  linear_forward<T>(p.y, p.a, p.W2, p.b2, rows, F, D);
  if (p.residual)
    for (int64_t i = 0; i < rows * D; ++i) p.y[i] = static_cast<T>(p.y[i] + p.residual[i]);
}

// dx = dh W1 with dh = (dy W2 ∘ mask/(1-p)) ∘ act'(h); dW1 += dhᵀ x; db1 += Σ dh; dW2 += dyᵀ a; db2 += Σ dy.
template <class T>
void run(const ops::FeedForwardBackward<T>& p) {
  const ops::FeedForwardDims d = ops::with_step_values(p.d);
  const int64_t rows = d.rows, D = d.D, F = d.F;
  std::vector<T> dh(static_cast<size_t>(rows * F));
  linear_backward<T>(dh.data(), p.dW2, p.db2, p.dy, p.a, p.W2, rows, F, D);
  for (int64_t i = 0; i < rows * F; ++i)
    dh[i] = static_cast<T>(dh[i] * dropout_factor(d.seed, d.offset, i, d.dropout) * act_derivative(p.h[i], d.activation));
  linear_backward<T>(p.dx, p.dW1, p.db1, dh.data(), p.x, p.W1, rows, D, F);
}

}  // namespace nf::ref
