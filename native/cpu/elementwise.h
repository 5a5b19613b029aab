// Elementwise ops of the residual stream: add (residual add), accumulate (merging gradients) and
// dropout (nn.Dropout with Philox masks regenerated in backward).
#pragma once
#include <cstdint>

#include "kernel_decl.h"

namespace nf::cpu {

struct DropoutDims {
  int64_t n = 0;        // elements
  float p = 0.0f;       // drop probability, in [0, 1); 0 is the identity
  uint64_t seed = 0;    // Philox key
  uint64_t offset = 0;  // Philox stream: one per dropout site and step
};

// out[n] = a + b. out may be a or b (not a partial overlap).
Status add(float* out, const float* a, const float* b, int64_t n);

// y[n] += x.
Status accumulate(float* y, const float* x, int64_t n);

// out = x * keep_i / (1 - p), keep_i = nf::dropout_keep(seed, offset, i, p) (core/philox.h).
// out may be x.
Status dropout_forward(float* out, const float* x, DropoutDims d);

// dx = dout * keep_i / (1 - p): the forward's mask, regenerated from (seed, offset). dx may be dout.
Status dropout_backward(float* dx, const float* dout, DropoutDims d);

NF_KERNEL_DECL(void add(float* out, const float* a, const float* b, int64_t n))
// out = x * keep_i / (1 - p), the forward and the backward alike (p > 0).
NF_KERNEL_DECL(void dropout(float* out, const float* x, const DropoutDims& d))

}  // namespace nf::cpu
