// Multi-head attention: the fused layer (QKV projection, flash-style attention core, output
// projection) forward and backward, and the attention core on its own, addressed through
// explicit pointers and strides so other ops (e.g. a KV-cache decode step) can reuse it.
#pragma once
#include <cstdint>

#include "kernel_decl.h"

namespace nf::cpu {

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
// (seed, offset) decides whether weight (b, h, i, j) is kept (then scaled by 1/(1-p)).
struct AttentionDropout {
  float p = 0.0f;
  uint64_t seed = 0, offset = 0;
};

// The attention core: O = dropout(softmax(scale Q Kᵀ, masked)) V for every (b, h).
struct AttentionCoreDims {
  int64_t B = 0, H = 0, Tq = 0, Tk = 0, Dh = 0;
  AttentionLayout q, k, v, o;  // the gradients dq, dk, dv, do share the layout of q, k, v, o
  float scale = 1.0f;
  AttentionDropout dropout;
};

// The layer (torch_reference.py MultiHeadAttention): self-attention when memory is null
// (then Tk = Tq), cross-attention (K, V from memory [B, Tk, D]) otherwise.
struct AttentionDims {
  int64_t B = 0, Tq = 0, Tk = 0, D = 0, H = 0;
  AttentionDropout dropout;
};

// The layer ops' argument checks (`cross`: memory given). Inline: the CUDA backend runs the same
// checks before its own limits.
inline Status attention_check(const char* op, const AttentionDims& d, bool cross, const void* qkv, const void* q,
                              const void* kv) {
  NF_CHECK(d.B >= 1 && d.Tq >= 1 && d.Tk >= 1 && d.D >= 1 && d.H >= 1, op, "B, Tq, Tk, D and H must be at least 1");
  NF_CHECK(d.D % d.H == 0, op, "D must be divisible by H");
  NF_CHECK(d.dropout.p >= 0.0f && d.dropout.p < 1.0f, op, "dropout p must be in [0, 1)");
  if (cross) {
    NF_CHECK(q && kv && !qkv, op, "cross-attention saves q and kv (and no qkv)");
  } else {
    NF_CHECK(qkv && !q && !kv, op, "self-attention saves qkv (and no q, kv)");
    NF_CHECK(d.Tk == d.Tq, op, "self-attention needs Tk == Tq");
  }
  return Status::Ok();
}

// out[B,Tq,D] = proj(attention(x Wqᵀ + bq, src Wkᵀ + bk, src Wvᵀ + bv)), src = memory or x.
//   weights (optional): the pre-dropout attention weights [B, H, Tq, Tk] (fully blocked rows 0).
//   Saved for backward: self-attention qkv [B, T, 3D] (Q | K | V of each token; q, kv null);
//   cross-attention q [B, Tq, D] and kv [B, Tk, 2D] (K | V; qkv null); ctx [B, Tq, D], the
//   attention output before proj; lse [B, H, Tq], each row's log Σ exp(score) (-inf when fully
//   blocked).
//   Weights: Wqkv [3D, D] (rows: q, k, v), bqkv [3D] (optional), Wproj [D, D], bproj [D] (optional).
Status attention_forward(float* out, float* weights, float* qkv, float* q, float* kv, float* ctx, float* lse,
                         const float* x, const float* memory, const AttentionMasks& masks, const float* Wqkv,
                         const float* bqkv, const float* Wproj, const float* bproj, AttentionDims d);

// dx [B, Tq, D] and dmemory [B, Tk, D] (cross-attention, optional) are overwritten; dWqkv,
// dbqkv, dWproj, dbproj accumulate (the biases' gradients are skipped when null). Takes the
// forward's saved buffers and the same masks and dropout.
Status attention_backward(float* dx, float* dmemory, float* dWqkv, float* dbqkv, float* dWproj, float* dbproj,
                          const float* dout, const float* qkv, const float* q, const float* kv, const float* ctx,
                          const float* lse, const float* x, const float* memory, const AttentionMasks& masks,
                          const float* Wqkv, const float* Wproj, AttentionDims d);

// One step of incremental decoding (greedy generation with a key/value cache): the new query
// row x [B, 1, D] is projected and attends to
//   self-attention (cache non-null): the K|V cache [B, max_t, 2D], after this step's own K|V
//     are written into row t, so keys 0..t (Tk = t + 1) are attended; kv must be null;
//   cross-attention (kv non-null): the memory's precomputed K|V [B, Tk, 2D] (rows D..3D-1 of
//     Wqkv applied to memory), with key_padding [B, Tk] (optional).
// out [B, 1, D] = proj(attention). No dropout (inference).
struct AttentionDecodeDims {
  int64_t B = 0, D = 0, H = 0;
  int64_t t = 0, max_t = 0;  // self-attention: the cache row to fill, and the cache's capacity
  int64_t Tk = 0;            // cross-attention: memory length
};
Status attention_decode(float* out, float* cache, const float* kv, const float* x, const uint8_t* key_padding,
                        const float* Wqkv, const float* bqkv, const float* Wproj, const float* bproj,
                        AttentionDecodeDims d);

// The core alone. Forward writes o (and lse [B, H, Tq], weights [B, H, Tq, Tk] when non-null).
// Backward overwrites dq, dk, dv from dout (layout of o), the forward's o and lse.
NF_KERNEL_DECL(void attention_core_forward(float* o, float* lse, float* weights, const float* q, const float* k,
                                           const float* v, const AttentionMasks& masks,
                                           const AttentionCoreDims& d))
NF_KERNEL_DECL(void attention_core_backward(float* dq, float* dk, float* dv, const float* dout, const float* q,
                                            const float* k, const float* v, const float* o, const float* lse,
                                            const AttentionMasks& masks, const AttentionCoreDims& d))
NF_KERNEL_DECL(void attention_decode(float* out, float* cache, const float* kv, const float* x,
                                     const uint8_t* key_padding, const float* Wqkv, const float* bqkv,
                                     const float* Wproj, const float* bproj, const AttentionDecodeDims& d))
NF_KERNEL_DECL(void attention_forward(float* out, float* weights, float* qkv, float* q, float* kv, float* ctx,
                                      float* lse, const float* x, const float* memory, const AttentionMasks& masks,
                                      const float* Wqkv, const float* bqkv, const float* Wproj, const float* bproj,
                                      const AttentionDims& d))
NF_KERNEL_DECL(void attention_backward(float* dx, float* dmemory, float* dWqkv, float* dbqkv, float* dWproj,
                                       float* dbproj, const float* dout, const float* qkv, const float* q,
                                       const float* kv, const float* ctx, const float* lse, const float* x,
                                       const float* memory, const AttentionMasks& masks, const float* Wqkv,
                                       const float* Wproj, const AttentionDims& d))

}  // namespace nf::cpu
