// Multi-head attention: the fused layer (QKV projection, flash-style attention core, output
// projection) forward and backward, and the attention core on its own, addressed through
// explicit pointers and strides so other ops (e.g. a KV-cache decode step) can reuse it.
#pragma once
#include <cstdint>

#include "../ops/attention.h"
#include "gemm.h"
#include "kernel_decl.h"

namespace nf::cpu {

// The descriptors are the op schema's (native/ops/attention.h), shared with every backend.
using ops::AttentionCoreDims;
using ops::AttentionDecodeDims;
using ops::AttentionDims;
using ops::AttentionDropout;
using ops::AttentionLayout;
using ops::AttentionMasks;

// The attentionForward op: out[B,Tq,D] = proj(attention(x Wqᵀ + bq, src Wkᵀ + bk, src Wvᵀ + bv)),
// src = memory or x.
//   weights (optional): the pre-dropout attention weights [B, H, Tq, Tk] (fully blocked rows 0).
//   Saved for backward: self-attention qkv [B, T, 3D] (Q | K | V of each token; q, kv null);
//   cross-attention q [B, Tq, D] and kv [B, Tk, 2D] (K | V; qkv null); ctx [B, Tq, D], the
//   attention output before proj; lse [B, H, Tq], each row's log Σ exp(score) (-inf when fully
//   blocked).
//   Weights: qkv_weight [3D, D] (rows: q, k, v), qkv_bias [3D] (optional), proj_weight [D, D], proj_bias [D] (optional),
//   and (optional) qkv_weight, proj_weight prepacked by packWeights, read instead of packing them.
Status run(const ops::AttentionForward<float>& p);

// The attentionBackward op: dx [B, Tq, D] and dmemory [B, Tk, D] (cross-attention, optional) are
// overwritten; d_qkv_weight, d_qkv_bias, d_proj_weight, d_proj_bias accumulate (the biases' gradients are skipped when
// null). Takes the forward's saved buffers and the same masks and dropout.
Status run(const ops::AttentionBackward<float>& p);

// The attentionDecode op: one step of incremental decoding (see ops::AttentionDecode).
Status run(const ops::AttentionDecode<float>& p);

// The core alone. Forward writes o (and lse [B, H, Tq], weights [B, H, Tq, Tk] when non-null);
// with bf16_p, the weights P ∘ Z that multiply V are rounded to bfloat16 (precision 'bf16', whose
// callers round Q, K, V themselves; on avx512bf16 its products then take bf16 pairs). Backward
// overwrites dq, dk, dv from dout (layout of o), the forward's o and lse; with bf16 it recomputes the
// scores as the forward did at bf16.
NF_KERNEL_DECL(void attention_core_forward(float* o, float* lse, float* weights, const float* q, const float* k,
                                           const float* v, const AttentionMasks& masks,
                                           const AttentionCoreDims& d, bool bf16_p = false))
NF_KERNEL_DECL(void attention_core_backward(float* dq, float* dk, float* dv, const float* dout, const float* q,
                                            const float* k, const float* v, const float* o, const float* lse,
                                            const AttentionMasks& masks, const AttentionCoreDims& d,
                                            bool bf16 = false))
// qkv_p, proj_p: the ops' qkvWeightPacked, projWeightPacked, checked (empty: not given).
NF_KERNEL_DECL(void attention_decode(const ops::AttentionDecode<float>& p, const PackedB& qkv_p = {},
                                     const PackedB& proj_p = {}))
NF_KERNEL_DECL(void attention_forward(const ops::AttentionForward<float>& p, const PackedB& qkv_p = {},
                                      const PackedB& proj_p = {}))
NF_KERNEL_DECL(void attention_backward(const ops::AttentionBackward<float>& p))

}  // namespace nf::cpu
