// The feed-forward network on the GPU as one layer-level op, forward and backward, the ops of
// native/ops/feedforward.h on device pointers.
#pragma once
#include <cstdint>

#include "gemm.h"
#include "../ops/feedforward.h"

namespace nf::cuda {

using FeedForwardDims = ops::FeedForwardDims;

// y [rows, D] = dropout(act(x W1ᵀ + b1)) W2ᵀ + b2; saves h = x W1ᵀ + b1 (optional) and a, the fc2
// input, both [rows, F]. W1 [F, D], b1 [F], W2 [D, F], b2 [D].
Status run(const ops::FeedForwardForward<float>& p);
Status run(const ops::FeedForwardForward<ops::bf16>& p);

// dx [rows, D] (overwritten); dW1, db1, dW2, db2 accumulate. h and a from the forward.
Status run(const ops::FeedForwardBackward<float>& p);
Status run(const ops::FeedForwardBackward<ops::bf16>& p);

}  // namespace nf::cuda
