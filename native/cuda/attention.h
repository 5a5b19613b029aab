// Multi-head attention on the GPU: the FlashAttention-2 style core (forward, backward) addressed
// through explicit strides, and the layer ops of native/ops/attention.h (QKV projection, core,
// output projection) built on it, on device pointers (masks included), queued on the backend's
// stream. Head widths up to 128. The core runs on tensor cores at every precision.
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
// when non-null, the pre-dropout weights [B, H, Tq, Tk]. precision: bf16 and tf32 round Q, K, V
// and P to the operand type, fp32 computes the products by the 3xTF32 split (fp32 accuracy);
// scores, softmax and accumulators are fp32 at every precision (flash_attention_forward.cu).
Status attention_core_forward(float* o, float* lse, float* weights, const float* q, const float* k, const float* v,
                              const AttentionMasks& masks, AttentionCoreDims d,
                              ops::Precision precision = ops::Precision::fp32);

// Overwrites dq, dk, dv from dout (layout of o) and the forward's o and lse.
Status attention_core_backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                               const float* v, const float* o, const float* lse, const AttentionMasks& masks,
                               AttentionCoreDims d, ops::Precision precision = ops::Precision::fp32);

// The same with bf16 storage (precision 'bf16'): q, k, v, o, dout and dq, dk, dv bf16 (outputs rounded
// to nearest even), lse and weights fp32. Always the bf16 tensor-core kernels (their operands are the
// stored values): `precision` is not read.
Status attention_core_forward(ops::bf16* o, float* lse, float* weights, const ops::bf16* q, const ops::bf16* k,
                              const ops::bf16* v, const AttentionMasks& masks, AttentionCoreDims d,
                              ops::Precision precision = ops::Precision::bf16);
Status attention_core_backward(ops::bf16* dq, ops::bf16* dk, ops::bf16* dv, const ops::bf16* dout, const ops::bf16* q,
                               const ops::bf16* k, const ops::bf16* v, const ops::bf16* o, const float* lse,
                               const AttentionMasks& masks, AttentionCoreDims d,
                               ops::Precision precision = ops::Precision::bf16);

// The layer ops: out[B,Tq,D] = proj(attention(x Wqᵀ + bq, src Wkᵀ + bk, src Wvᵀ + bv)), src = memory
// or x, with the saved buffers of native/ops/attention.h; and its backward (dx, dmemory overwritten;
// the weight gradients accumulate). The bf16 ones (precision 'bf16') keep x, memory, the saved qkv /
// q / kv and ctx, out and the activation gradients in bf16 (the weights: the parameters' bf16 copies);
// biases, parameter gradients, lse and weights float.
Status run(const ops::AttentionForward<float>& p);
Status run(const ops::AttentionForward<ops::bf16>& p);
Status run(const ops::AttentionBackward<float>& p);
Status run(const ops::AttentionBackward<ops::bf16>& p);

}  // namespace nf::cuda
