// Multi-head attention on the GPU: the FlashAttention-2 style core (forward, backward) addressed
// through explicit strides, and the fused layer (QKV projection, core, output projection) built on
// it. The structs, arguments and semantics are native/cpu/attention.h's, on device pointers (masks
// included), queued on the backend's stream. Head widths up to 128.
#pragma once
#include <cstdint>

#include "../core/status.h"

namespace nf::cuda {

// Where element (b, t, h, d) of a [B, T, H, Dh] view lies: b*batch + t*row + h*head + d
// (elements). Heads interleaved along D in a [B, T, D] buffer: {T*D, D, Dh}.
struct AttentionLayout {
  int64_t batch = 0, row = 0, head = 0;
};

// Which (query i, key j) pairs may NOT be attended to; a pair is blocked when any mask says so.
struct AttentionMasks {
  bool causal = false;                   // blocks j > i
  const uint8_t* key_padding = nullptr;  // [B, Tk], nonzero = blocked
  const uint8_t* attn = nullptr;         // [Tq, Tk], or [B, Tq, Tk] when attn_batched; nonzero = blocked
  bool attn_batched = false;
};

// Dropout on the attention weights: element ((b*H + h)*Tq + i)*Tk + j of the Philox stream
// (seed, offset) decides whether weight (b, h, i, j) is kept (then scaled by 1/(1-p)): the same
// numbers as the CPU backend draws.
struct AttentionDropout {
  float p = 0.0f;
  uint64_t seed = 0, offset = 0;
};

// The core: O = dropout(softmax(scale Q Kᵀ, masked)) V for every (b, h).
struct AttentionCoreDims {
  int64_t B = 0, H = 0, Tq = 0, Tk = 0, Dh = 0;
  AttentionLayout q, k, v, o;  // the gradients dq, dk, dv, do share the layout of q, k, v, o
  float scale = 1.0f;
  AttentionDropout dropout;
};

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
struct AttentionDims {
  int64_t B = 0, Tq = 0, Tk = 0, D = 0, H = 0;
  AttentionDropout dropout;
};

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
