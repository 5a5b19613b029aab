// Multi-head attention on the GPU: the FlashAttention-2 style core (forward, backward) addressed
// through explicit strides, and the layer ops of native/ops/attention.h (QKV projection, core,
// output projection) built on it, on device pointers (masks included), queued on the backend's
// stream. Head widths up to 128. The core runs on CUDA cores (fp32) or tensor cores (bf16, tf32).
#pragma once
#include <cstdint>

#include "../core/status.h"
#include "../ops/attention.h"  // the descriptors, shared with every backend

namespace nf::cuda {

using ops::AttentionCoreDims;
using ops::AttentionDims;
using ops::AttentionDropout;
using ops::AttentionLayout;
using ops::AttentionMasks;

// Writes o, lse [B, H, Tq] (log Σ exp(score); -inf for a fully blocked row, whose o is 0) and,
// when non-null, the pre-dropout weights [B, H, Tq, Tk]. precision: fp32 runs the CUDA-core kernels;
// bf16 and tf32 the tensor-core kernels (flash_attention_forward.cu: Q, K, V and P rounded to the
// operand type; scores, softmax and accumulators fp32).
Status attention_core_forward(float* o, float* lse, float* weights, const float* q, const float* k, const float* v,
                              const AttentionMasks& masks, AttentionCoreDims d,
                              ops::Precision precision = ops::Precision::fp32);

// Overwrites dq, dk, dv from dout (layout of o) and the forward's o and lse.
Status attention_core_backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                               const float* v, const float* o, const float* lse, const AttentionMasks& masks,
                               AttentionCoreDims d, ops::Precision precision = ops::Precision::fp32);

// The layer ops: out[B,Tq,D] = proj(attention(x Wqᵀ + bq, src Wkᵀ + bk, src Wvᵀ + bv)), src = memory
// or x, with the saved buffers of native/ops/attention.h; and its backward (dx, dmemory overwritten;
// the weight gradients accumulate).
Status run(const ops::AttentionForward<float>& p);
Status run(const ops::AttentionBackward<float>& p);

}  // namespace nf::cuda
