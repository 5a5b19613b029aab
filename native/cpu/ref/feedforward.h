// Reference feed-forward network: the Linear references plus plain loops for dropout and the
// activation, double accumulators, templated on the storage type. The math is in
// ../feedforward.cpp's header and torch_reference.py's FeedForward. `act` numbers as cpu::Act.
#pragma once
#include <cstdint>
#include <vector>

#include "../../core/philox.h"
#include "activation.h"
#include "linear.h"

namespace nf::ref {

// Dropout's multiplier for stream element i: 0 when dropped, 1/(1-p) when kept.
inline double dropout_factor(uint64_t seed, uint64_t offset, int64_t i, float p) {
  if (p <= 0.0f) return 1.0;
  return dropout_keep(seed, offset, static_cast<uint64_t>(i), p) ? 1.0 / (1.0 - double(p)) : 0.0;
}

// y = fc2(dropout(act(x W1ᵀ + b1))); saves h (pre-activation, optional) and a (the fc2 input).
template <class T>
void feedforward_forward(T* y, T* h, T* a, const T* x, const T* W1, const T* b1, const T* W2, const T* b2,
                         int64_t rows, int64_t D, int64_t F, int act, float p, uint64_t seed, uint64_t offset) {
  gemm<T>(a, h, x, W1, b1, rows, F, D, false, true, 1.0, 0.0, act);
  for (int64_t i = 0; i < rows * F; ++i) a[i] = static_cast<T>(a[i] * dropout_factor(seed, offset, i, p));
  linear_forward<T>(y, a, W2, b2, rows, F, D);
}

// dx = dh W1 with dh = (dy W2 ∘ mask/(1-p)) ∘ act'(h); dW1 += dhᵀ x; db1 += Σ dh; dW2 += dyᵀ a; db2 += Σ dy.
template <class T>
void feedforward_backward(T* dx, T* dW1, T* db1, T* dW2, T* db2, const T* dy, const T* x, const T* h, const T* a,
                          const T* W1, const T* W2, int64_t rows, int64_t D, int64_t F, int act, float p,
                          uint64_t seed, uint64_t offset) {
  std::vector<T> dh(static_cast<size_t>(rows * F));
  linear_backward<T>(dh.data(), dW2, db2, dy, a, W2, rows, F, D);
  for (int64_t i = 0; i < rows * F; ++i)
    dh[i] = static_cast<T>(dh[i] * dropout_factor(seed, offset, i, p) * act_derivative(h[i], act));
  linear_backward<T>(dx, dW1, db1, dh.data(), x, W1, rows, D, F);
}

}  // namespace nf::ref
