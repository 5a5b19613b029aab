// Feed-forward network (the Transformer MLP): y = fc2(dropout(act(fc1(x)))), forward and backward
// (the ops and their fields: native/ops/feedforward.h).
#pragma once
#include <cstdint>

#include "../ops/feedforward.h"
#include "gemm.h"

namespace nf::cpu {

using FeedForwardDims = ops::FeedForwardDims;

// y[rows,D] = fc2(dropout(act(x W1ᵀ + b1))) with W1 [F,D], b1 [F], W2 [D,F], b2 [D].
// Saves h[rows,F] = x W1ᵀ + b1 (the pre-activation; null when no backward follows) and
// a[rows,F] = dropout(act(h)) (the fc2 input, always written).
Status run(const ops::FeedForwardForward<float>& p);

// dx = dh W1 (overwritten) with dh = (dy W2 ∘ mask/(1-p)) ∘ act'(h); dW1 += dhᵀ x; db1 += Σ dh;
// dW2 += dyᵀ a; db2 += Σ dy. The dropout mask is regenerated from (seed, offset).
Status run(const ops::FeedForwardBackward<float>& p);

// The same with bf16 activations (precision 'bf16'; native/cpu/feedforward.cpp says what is bf16).
Status run(const ops::FeedForwardForward<ops::bf16>& p);
Status run(const ops::FeedForwardBackward<ops::bf16>& p);

// W1p, W2p: the op's W1Packed, W2Packed, checked (empty: not given).
NF_KERNEL_DECL(void feedforward_forward(const ops::FeedForwardForward<float>& p, const PackedB& W1p = {},
                                        const PackedB& W2p = {}))
NF_KERNEL_DECL(void feedforward_forward_bf16(const ops::FeedForwardForward<ops::bf16>& p, const PackedB& W1p = {},
                                             const PackedB& W2p = {}))
NF_KERNEL_DECL(void feedforward_backward(const ops::FeedForwardBackward<float>& p))
NF_KERNEL_DECL(void feedforward_backward_bf16(const ops::FeedForwardBackward<ops::bf16>& p))

}  // namespace nf::cpu
