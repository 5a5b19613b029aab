// Feed-forward network (the Transformer MLP): y = fc2(dropout(act(fc1(x)))), forward and backward.
#pragma once
#include <cstdint>

#include "gemm.h"

namespace nf::cpu {

struct FeedForwardDims {
  int64_t rows = 0;             // B*T: every row is transformed independently
  int64_t D = 0;                // model width (fc1 input, fc2 output)
  int64_t F = 0;                // hidden width (fc1 output, fc2 input)
  Act activation = Act::gelu;   // relu, gelu (erf) or gelu_tanh
  float dropout = 0.0f;         // probability of zeroing a hidden value, in [0, 1]
  uint64_t seed = 0, offset = 0;  // the Philox stream of the dropout mask (element index row*F + f)
};

// y[rows,D] = fc2(dropout(act(x W1ᵀ + b1))) with W1 [F,D], b1 [F], W2 [D,F], b2 [D].
// Saves h[rows,F] = x W1ᵀ + b1 (the pre-activation; null when no backward follows) and
// a[rows,F] = dropout(act(h)) (the fc2 input, always written).
Status feedforward_forward(float* y, float* h, float* a, const float* x, const float* W1, const float* b1,
                           const float* W2, const float* b2, FeedForwardDims d);

// dx = dh W1 (overwritten) with dh = (dy W2 ∘ mask/(1-p)) ∘ act'(h); dW1 += dhᵀ x; db1 += Σ dh;
// dW2 += dyᵀ a; db2 += Σ dy. The dropout mask is regenerated from (seed, offset).
Status feedforward_backward(float* dx, float* dW1, float* db1, float* dW2, float* db2, const float* dy,
                            const float* x, const float* h, const float* a, const float* W1, const float* W2,
                            FeedForwardDims d);

NF_KERNEL_DECL(void feedforward_forward(float* y, float* h, float* a, const float* x, const float* W1,
                                        const float* b1, const float* W2, const float* b2,
                                        const FeedForwardDims& d))
NF_KERNEL_DECL(void feedforward_backward(float* dx, float* dW1, float* db1, float* dW2, float* db2,
                                         const float* dy, const float* x, const float* h, const float* a,
                                         const float* W1, const float* W2, const FeedForwardDims& d))

}  // namespace nf::cpu
