// The feed-forward network on the GPU as one layer-level op, forward and backward, with the
// arguments and semantics of native/cpu/feedforward.h on device pointers.
#pragma once
#include <cstdint>

#include "gemm.h"
#include "../cpu/feedforward.h"  // the dims structs, shared with the CPU kernels

namespace nf::cuda {

using FeedForwardDims = cpu::FeedForwardDims;

// y [rows, D] = dropout(act(x W1ᵀ + b1)) W2ᵀ + b2; saves h = x W1ᵀ + b1 (optional) and a, the fc2
// input, both [rows, F]. W1 [F, D], b1 [F], W2 [D, F], b2 [D].
Status feedforward_forward(float* y, float* h, float* a, const float* x, const float* W1, const float* b1,
                           const float* W2, const float* b2, FeedForwardDims d);

// dx [rows, D] (overwritten); dW1, db1, dW2, db2 accumulate. h and a from the forward.
Status feedforward_backward(float* dx, float* dW1, float* db1, float* dW2, float* db2, const float* dy,
                            const float* x, const float* h, const float* a, const float* W1, const float* W2,
                            FeedForwardDims d);

}  // namespace nf::cuda
