// Multi-head attention on the GPU: the FlashAttention-2 style core (forward, backward) addressed
// through explicit strides, and the fused layer (QKV projection, core, output projection) built on
// it. The structs, arguments and semantics are native/cpu/attention.h's, on device pointers (masks
// included), queued on the backend's stream. Head widths up to 128.
#pragma once
#include <cstdint>

#include "../core/status.h"
#include "../cpu/attention.h"  // the dims structs, shared with the CPU kernels

namespace nf::cuda {

// Where element (b, t, h, d) of a [B, T, H, Dh] view lies: b*batch + t*row + h*head + d
// (elements). Heads interleaved along D in a [B, T, D] buffer: {T*D, D, Dh}.
using AttentionLayout = cpu::AttentionLayout;

// Which (query i, key j) pairs may NOT be attended to; a pair is blocked when any mask says so.
using AttentionMasks = cpu::AttentionMasks;

// Dropout on the attention weights: element ((b*H + h)*Tq + i)*Tk + j of the Philox stream
// (seed, offset) decides whether weight (b, h, i, j) is kept (then scaled by 1/(1-p)): the same
// numbers as the CPU backend draws.
using AttentionDropout = cpu::AttentionDropout;

// The core: O = dropout(softmax(scale Q Kᵀ, masked)) V for every (b, h).
using AttentionCoreDims = cpu::AttentionCoreDims;

// Writes o, lse [B, H, Tq] (log Σ exp(score); -inf for a fully blocked row, whose o is 0) and,
// when non-null, the pre-dropout weights [B, H, Tq, Tk].
Status attention_core_forward(float* o, float* lse, float* weights, const float* q, const float* k, const float* v,
                              const AttentionMasks& masks, AttentionCoreDims d);

// Overwrites dq, dk, dv from dout (layout of o) and the forward's o and lse.
Status attention_core_backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                               const float* v, const float* o, const float* lse, const AttentionMasks& masks,
                               AttentionCoreDims d);

// The layer (torch_reference.py MultiHeadAttention): self-attention when memory is null (then
// Tk = Tq), cross-attention (K, V from memory [B, Tk, D]) otherwise.
using AttentionDims = cpu::AttentionDims;

// out[B,Tq,D] = proj(attention(x Wqᵀ + bq, src Wkᵀ + bk, src Wvᵀ + bv)), src = memory or x.
// Saved: self-attention qkv [B, T, 3D] (q, kv null); cross-attention q [B, Tq, D] and kv [B, Tk, 2D]
// (qkv null); ctx [B, Tq, D]; lse [B, H, Tq]. weights (optional) [B, H, Tq, Tk]. Weights: Wqkv
// [3D, D], bqkv [3D] (optional), Wproj [D, D], bproj [D] (optional).
Status attention_forward(float* out, float* weights, float* qkv, float* q, float* kv, float* ctx, float* lse,
                         const float* x, const float* memory, const AttentionMasks& masks, const float* Wqkv,
                         const float* bqkv, const float* Wproj, const float* bproj, AttentionDims d);

// dx [B, Tq, D] and dmemory [B, Tk, D] (cross-attention, optional) are overwritten; dWqkv, dbqkv,
// dWproj, dbproj accumulate (the biases' gradients are skipped when null).
Status attention_backward(float* dx, float* dmemory, float* dWqkv, float* dbqkv, float* dWproj, float* dbproj,
                          const float* dout, const float* qkv, const float* q, const float* kv, const float* ctx,
                          const float* lse, const float* x, const float* memory, const AttentionMasks& masks,
                          const float* Wqkv, const float* Wproj, AttentionDims d);

}  // namespace nf::cuda
