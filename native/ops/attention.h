// Multi-head attention (reference/torch_reference.py MultiHeadAttention): the fused layer (QKV projection,
// attention core, output projection) forward and backward, one incremental decoding step, and the
// descriptors of the attention core every backend's kernels address through explicit strides.
// Math (per batch b and head h; scale = the `scale` param, by default 1/sqrt(Dh)):
//   S = scale Q Kᵀ with blocked pairs set to -inf; P = softmax over each row of S (a row whose keys
//   are all blocked gives P = 0, lse = -inf); O = (P ∘ Z) V, Z the dropout mask scaled by 1/(1-p);
//   out = proj(O of all heads side by side) = O Wprojᵀ + proj_bias.
//   Backward: Di = rowsum(dO ∘ O); dV = (P ∘ Z)ᵀ dO; dP = (dO Vᵀ) ∘ Z; dS = P ∘ (dP − Di);
//   dQ = scale dS K; dK = scale dSᵀ Q.
// Layout: self-attention saves qkv [B, T, 3D] (Q | K | V of each token); cross-attention q
// [B, Tq, D] and kv [B, Tk, 2D] (K | V); heads interleaved along D ([B, T, H, Dh]); ctx [B, Tq, D]
// (the heads' outputs before the projection); lse [B, H, Tq]; weights [B, H, Tq, Tk].
// Dimension key: B batch, Tq/Tk query/key lengths, D model width, H heads, Dh = D/H head width.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>

#include "../core/status.h"
#include "packed.h"
#include "precision.h"
#include "schema.h"

namespace nf::ops {

// Where element (b, t, h, d) of a [B, T, H, Dh] view lies: b*batch + t*row + h*head + d
// (elements). Heads interleaved along D in a [B, T, D] buffer: {T*D, D, Dh}.
struct AttentionLayout {
  int64_t batch = 0, row = 0, head = 0;
};

// Which (query i, key j) pairs may NOT be attended to; a pair is blocked when any mask says so.
struct AttentionMasks {
  bool causal = false;                   // blocks j > i
  const uint8_t* key_padding_mask = nullptr;  // [B, Tk], nonzero = blocked
  const uint8_t* attn_mask = nullptr;    // [Tq, Tk], or [B, Tq, Tk] when attn_batched; nonzero = blocked
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

// The layer: self-attention when memory is null (then Tk = Tq), cross-attention (K, V from memory
// [B, Tk, D]) otherwise. scale: the scores' scale, 0 for the default 1/√Dh (see softmax_scale).
struct AttentionDims {
  int64_t B = 0, Tq = 0, Tk = 0, D = 0, H = 0;
  AttentionDropout dropout;
  float scale = 0.0f;
};

// The scale of the scores Q Kᵀ: `scale` when positive, else 1/√Dh (torch's scaled_dot_product_attention
// with scale=None). A head of width n < Dh computes exactly as one zero-padded to Dh with scale 1/√n.
template <class F>
inline F softmax_scale(float scale, int64_t Dh) {
  return scale > 0.0f ? F(scale) : F(1) / std::sqrt(F(Dh));
}

// Reads the optional `scale` field of the attention ops.
template <class R>
void attention_scale(R& r, float& scale) {
  r.number(scale, "scale", 0.0, 0.0);
}

// The layer ops' checks every backend runs (`cross`: memory given).
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

// What both layer ops read first: dims, memory (cross-attention), masks and dropout.
template <class R, class T>
void attention_common(R& r, AttentionDims& d, AttentionMasks& m, const T*& memory) {
  r.dim(d.B, "B");
  r.dim(d.Tq, "Tq");
  r.integer(d.Tk, "Tk", d.Tq, 1, kMaxDim);
  r.dim(d.D, "D");
  r.dim(d.H, "H");
  if (d.D % d.H != 0)
    r.fail("D (" + std::to_string(d.D) + ") must be divisible by H (" + std::to_string(d.H) + ")");
  r.in(memory, "memory", NF_SHAPE(d.B, d.Tk, d.D), optional,
       doc("cross-attention keys/values source; absent for self-attention (keys/values from x, Tk = Tq)"));
  if (!memory && d.Tk != d.Tq)
    r.fail("self-attention (no memory) needs Tk == Tq, but Tk = " + std::to_string(d.Tk) + " and Tq = " +
           std::to_string(d.Tq));
  r.flag(m.causal, "causal", false);
  r.in(m.key_padding_mask, "keyPaddingMask", NF_SHAPE(d.B, d.Tk), optional,
       doc("nonzero = padding (blocked for every query); masks have PyTorch's meaning: nonzero = may NOT be "
           "attended to, and a query row whose keys are all blocked outputs 0 and passes no gradient"));
  // attnMask is [Tq, Tk] (shared by the batch) or [B, Tq, Tk]; its length tells which.
  m.attn_batched = d.B > 1 && r.length("attnMask", m.attn_mask) == r.count(NF_SHAPE(d.B, d.Tq, d.Tk));
  r.in(m.attn_mask, "attnMask",
       m.attn_batched ? Shape("[Tq, Tk] or [B, Tq, Tk]", d.B, d.Tq, d.Tk) : Shape("[Tq, Tk] or [B, Tq, Tk]", d.Tq, d.Tk),
       optional, doc("nonzero = blocked; [Tq, Tk] is shared by the batch, [B, Tq, Tk] is per example (the length decides)"));
  r.number(d.dropout.p, "dropoutP", 0.0, 0.0, 1.0);
  if (d.dropout.p >= 1.0f) r.fail("expected dropoutP in [0, 1) but received 1");
  r.integer(d.dropout.seed, "seed", 0, 0, kMaxSafeInteger);
  r.integer(d.dropout.offset, "offset", 0, 0, kMaxSafeInteger);
  attention_scale(r, d.scale);
}

// The optional prepacked weights of the forward ops (packWeights): qkvWeight [3D, D] as N = 3D, K = D,
// projWeight [D, D] as N = K = D.
template <class R, class T>
void attention_packed(R& r, int64_t D, Precision prec, const T*& qkv_weight_packed, const T*& proj_weight_packed) {
  r.in(qkv_weight_packed, "qkvWeightPacked", NF_PACKED_SHAPE(prec, 3 * D, D, "3 · D", "D"), optional,
       doc("qkvWeight prepacked by packWeights (N = 3 · D, K = D)"));
  r.in(proj_weight_packed, "projWeightPacked", NF_PACKED_SHAPE(prec, D, D, "D", "D"), optional,
       doc("projWeight prepacked by packWeights (N = K = D)"));
}

// The buffers the forward saves for the backward (P = T*, L = Acc<T>*) and the backward takes back
// (const): the projections (self-attention qkv, cross-attention q and kv), ctx and lse (fp32 under bf16).
template <class R, class P, class L>
void attention_saved(R& r, const AttentionDims& d, bool self, P& qkv, P& q, P& kv, P& ctx, L& lse) {
  r.saved(qkv, "qkv", NF_SHAPE(d.B, d.Tq, 3 * d.D), when(self, "memory is absent (self-attention)"),
          doc("Q | K | V of each token, heads interleaved along D"));
  r.saved(q, "q", NF_SHAPE(d.B, d.Tq, d.D), when(!self, "memory is given (cross-attention)"));
  r.saved(kv, "kv", NF_SHAPE(d.B, d.Tk, 2 * d.D), when(!self, "memory is given (cross-attention)"), doc("K | V"));
  r.saved(ctx, "ctx", NF_SHAPE(d.B, d.Tq, d.D), doc("the heads' outputs before the output projection"));
  r.saved(lse, "lse", NF_SHAPE(d.B, d.H, d.Tq), doc("each row's log Σ exp(score) (-Infinity for a fully blocked row)"));
}

// What the layer's forward and backward params share, as flash-attention's Flash_bwd_params extends
// Flash_fwd_params: the dims, masks, memory, the buffers the forward saves (S = T*, L = Acc<T>*:
// written) and the backward takes back (const: read), and the input and weights both read. Each op's
// `fields` still reads them in its own schema order.
// Storage (T = bf16, precision 'bf16' on CUDA): x, memory, qkv / q / kv, ctx, out and the activation
// gradients bf16, the weights the parameters' bf16 copies; biases, parameter gradients, lse and the
// attention weights output float (Acc<T>).
template <class T, class S, class L>
struct AttentionParams {
  AttentionDims d;
  AttentionMasks m;
  Precision precision = Precision::fp32;  // the projections', and the core's products too (CUDA: tensor cores; CPU at 'bf16': bf16-rounded inputs)
  const T* memory = nullptr;
  S qkv = nullptr;
  S q = nullptr;
  S kv = nullptr;
  S ctx = nullptr;
  L lse = nullptr;
  const T* x = nullptr;
  const T* qkv_weight = nullptr;
  const T* proj_weight = nullptr;
};

template <class T>
struct AttentionForward : AttentionParams<T, T*, Acc<T>*> {
  static constexpr const char* name = "attentionForward";
  static constexpr const char* summary =
      "out [B, Tq, D] = proj(softmax(scale Q Kᵀ, masked) (dropped out) V) (scale: default 1/√Dh) with Q = x Wqᵀ + bq and K, V = src Wkᵀ "
      "+ bk, src Wvᵀ + bv (src = memory or x). Weights: qkvWeight [3D, D] (rows q, k, v), qkvBias [3D], "
      "projWeight [D, D], projBias [D] (biases optional). `weights` (optional output) receives the pre-dropout "
      "attention weights [B, H, Tq, Tk]. Fills the saved buffers (qkv, or q and kv; ctx; lse). Dropout weight "
      "(b, h, i, j) uses element ((b*H + h)*Tq + i)*Tk + j of the Philox stream (seed, offset); kept weights "
      "are scaled by 1/(1-p). Backward must get the same dropoutP, seed and offset. qkvWeightPacked, "
      "projWeightPacked (optional): the weights prepacked by packWeights, read by the CPU kernels instead of packing "
      "them (same result, bit for bit).";
  T* out = nullptr;
  Acc<T>* weights = nullptr;
  const Acc<T>* qkv_bias = nullptr;
  const Acc<T>* proj_bias = nullptr;
  const T* qkv_weight_packed = nullptr;
  const T* proj_weight_packed = nullptr;
  const T* qkv_bias_rounded = nullptr;
  const T* proj_bias_rounded = nullptr;

  template <class R>
  static void fields(R& r, AttentionForward& p) {
    attention_common(r, p.d, p.m, p.memory);
    precision_field(r, p.precision);
    const AttentionDims& d = p.d;
    const bool self = !p.memory;
    r.out(p.out, "out", NF_SHAPE(d.B, d.Tq, d.D));
    r.out(p.weights, "weights", NF_SHAPE(d.B, d.H, d.Tq, d.Tk), optional, doc("the pre-dropout attention weights"));
    attention_saved(r, d, self, p.qkv, p.q, p.kv, p.ctx, p.lse);
    r.in(p.x, "x", NF_SHAPE(d.B, d.Tq, d.D));
    r.in(p.qkv_weight, "qkvWeight", NF_SHAPE(3 * d.D, d.D));
    r.in(p.qkv_bias, "qkvBias", NF_SHAPE(3 * d.D), optional);
    r.in(p.proj_weight, "projWeight", NF_SHAPE(d.D, d.D));
    r.in(p.proj_bias, "projBias", NF_SHAPE(d.D), optional);
    attention_packed(r, d.D, p.precision, p.qkv_weight_packed, p.proj_weight_packed);
    r.in(p.qkv_bias_rounded, "qkvBiasRounded", NF_SHAPE(3 * d.D), optional, doc(kRoundedBiasDoc));
    r.in(p.proj_bias_rounded, "projBiasRounded", NF_SHAPE(d.D), optional, doc(kRoundedBiasDoc));
  }
};

template <class T>
struct AttentionBackward : AttentionParams<T, const T*, const Acc<T>*> {
  static constexpr const char* name = "attentionBackward";
  static constexpr const char* summary =
      "From dout [B, Tq, D]: overwrites dx [B, Tq, D] and (cross-attention, optional) dMemory [B, Tk, D]; "
      "accumulates (+=) dQkvWeight, dQkvBias, dProjWeight, dProjBias (the biases' gradients optional). Takes "
      "the forward's inputs, weights, masks, dropout and saved buffers.";
  T* dx = nullptr;
  T* dmemory = nullptr;
  Acc<T>* d_qkv_weight = nullptr;
  Acc<T>* d_qkv_bias = nullptr;
  Acc<T>* d_proj_weight = nullptr;
  Acc<T>* d_proj_bias = nullptr;
  const T* dout = nullptr;

  template <class R>
  static void fields(R& r, AttentionBackward& p) {
    attention_common(r, p.d, p.m, p.memory);
    precision_field(r, p.precision);
    const AttentionDims& d = p.d;
    const bool self = !p.memory;
    r.out(p.dx, "dx", NF_SHAPE(d.B, d.Tq, d.D), grad_of("x"));
    r.out(p.dmemory, "dMemory", NF_SHAPE(d.B, d.Tk, d.D), optional, grad_of("memory"));
    if (p.dmemory && !p.memory) r.fail("dMemory is only for cross-attention (with memory)");
    r.inout(p.d_qkv_weight, "dQkvWeight", NF_SHAPE(3 * d.D, d.D), grad_of("qkvWeight"));
    r.inout(p.d_qkv_bias, "dQkvBias", NF_SHAPE(3 * d.D), optional, grad_of("qkvBias"));
    r.inout(p.d_proj_weight, "dProjWeight", NF_SHAPE(d.D, d.D), grad_of("projWeight"));
    r.inout(p.d_proj_bias, "dProjBias", NF_SHAPE(d.D), optional, grad_of("projBias"));
    r.in(p.dout, "dout", NF_SHAPE(d.B, d.Tq, d.D), grad_of("out"));
    attention_saved(r, d, self, p.qkv, p.q, p.kv, p.ctx, p.lse);
    r.in(p.x, "x", NF_SHAPE(d.B, d.Tq, d.D));
    r.in(p.qkv_weight, "qkvWeight", NF_SHAPE(3 * d.D, d.D));
    r.in(p.proj_weight, "projWeight", NF_SHAPE(d.D, d.D));
  }
};

// One step of incremental decoding (greedy generation with a key/value cache): the new query row
// x [B, 1, D] is projected and attends to
//   self-attention (cache given): the K|V cache [B, max_t, 2D], after this step's own K|V are
//     written into row t, so keys 0..t (Tk = t + 1) are attended;
//   cross-attention (kv given): the memory's precomputed K|V [B, Tk, 2D] (rows D..3D-1 of qkv_weight
//     applied to memory), with key_padding_mask [B, Tk] (optional).
// out [B, 1, D] = proj(attention). No dropout (inference).
struct AttentionDecodeDims {
  int64_t B = 0, D = 0, H = 0;
  int64_t t = 0, max_t = 0;  // self-attention: the cache row to fill, and the cache's capacity
  int64_t Tk = 0;            // cross-attention: memory length
  float scale = 0.0f;        // the scores' scale, 0 for 1/√Dh (see softmax_scale)
};

// The attention core of one decoding step, as every backend's attention_decode sets it up around its
// own projections: the query projection's width (self-attention 3D: q | k | v, whose k | v go into
// cache row t; cross-attention D: q), and the core's dims and masks for the query row against its
// keys, read in place: the cache's rows 0..t (batch stride max_t·2D, row stride 2D), or the memory's
// Tk rows of kv (batch stride Tk·2D) with the key padding. The query is the projection [B, width].
struct AttentionDecodeCore {
  int64_t qkv_width = 0;
  AttentionCoreDims dims;
  AttentionMasks masks;
};

inline AttentionDecodeCore attention_decode_core(const AttentionDecodeDims& d, bool self, const uint8_t* key_padding_mask) {
  AttentionDecodeCore core;
  const int64_t D = d.D, Dh = D / d.H, key_rows = self ? d.max_t : d.Tk;
  core.qkv_width = self ? 3 * D : D;
  AttentionCoreDims& c = core.dims;
  c.B = d.B, c.H = d.H, c.Tq = 1, c.Tk = self ? d.t + 1 : d.Tk, c.Dh = Dh;
  c.scale = softmax_scale<float>(d.scale, Dh);
  c.q = {core.qkv_width, core.qkv_width, Dh};
  c.k = c.v = {key_rows * 2 * D, 2 * D, Dh};
  c.o = {D, D, Dh};
  if (!self) core.masks.key_padding_mask = key_padding_mask;
  return core;
}

template <class T>
struct AttentionDecode {
  static constexpr const char* name = "attentionDecode";
  static constexpr const char* summary =
      "One step of incremental decoding with a key/value cache (float32 only, no dropout): the query row x [B, D] "
      "is projected and attends to either (self-attention) `cache` [B, maxT, 2D], after this step's K|V are "
      "written into row `t` (keys 0..t), or (cross-attention) `kv` [B, Tk, 2D], the memory's precomputed K|V "
      "(rows D..3D-1 of qkvWeight applied to memory) with an optional keyPaddingMask [B, Tk]. out [B, D] = the "
      "attention layer's output for that row, with the scores scaled by `scale` (default 1/√Dh). Exactly one of cache "
      "and kv. qkvWeightPacked, projWeightPacked (optional): the weights prepacked by packWeights.";
  AttentionDecodeDims d;
  Precision precision = Precision::fp32;  // the projections' (the one-row core: fp32 on CUDA, bf16-rounded inputs on the CPU at 'bf16')
  T* out = nullptr;
  T* cache = nullptr;
  const T* kv = nullptr;
  const T* x = nullptr;
  const uint8_t* key_padding_mask = nullptr;
  const T* qkv_weight = nullptr;
  const T* qkv_bias = nullptr;
  const T* proj_weight = nullptr;
  const T* proj_bias = nullptr;
  const T* qkv_weight_packed = nullptr;
  const T* proj_weight_packed = nullptr;

  template <class R>
  static void fields(R& r, AttentionDecode& p) {
    AttentionDecodeDims& d = p.d;
    r.dim(d.B, "B");
    r.dim(d.D, "D");
    r.dim(d.H, "H");
    if (d.D % d.H != 0)
      r.fail("D (" + std::to_string(d.D) + ") must be divisible by H (" + std::to_string(d.H) + ")");
    const bool self = r.given("cache");
    if (self == r.given("kv")) r.fail("expected exactly one of cache (self-attention) and kv (cross-attention)");
    r.dim(d.max_t, "maxT", 1, kMaxDim, when(self, "cache is given (self-attention)"));
    r.dim(d.t, "t", 0, d.max_t - 1, when(self, "cache is given (self-attention)"));
    r.inout(p.cache, "cache", Shape("[B, maxT, 2 * D]", d.B, d.max_t, 2 * d.D), when(self, "cache is given (self-attention)"),
            doc("K | V of the rows decoded so far; this step's go into row t"));
    r.dim(d.Tk, "Tk", 1, kMaxDim, when(!self, "kv is given (cross-attention)"));
    r.in(p.kv, "kv", NF_SHAPE(d.B, d.Tk, 2 * d.D), when(!self, "kv is given (cross-attention)"));
    r.in(p.key_padding_mask, "keyPaddingMask", NF_SHAPE(d.B, d.Tk), optional, when(!self, "kv is given (cross-attention)"));
    attention_scale(r, d.scale);
    precision_field(r, p.precision);
    r.out(p.out, "out", NF_SHAPE(d.B, d.D));
    r.in(p.x, "x", NF_SHAPE(d.B, d.D));
    r.in(p.qkv_weight, "qkvWeight", NF_SHAPE(3 * d.D, d.D));
    r.in(p.qkv_bias, "qkvBias", NF_SHAPE(3 * d.D), optional);
    r.in(p.proj_weight, "projWeight", NF_SHAPE(d.D, d.D));
    r.in(p.proj_bias, "projBias", NF_SHAPE(d.D), optional);
    attention_packed(r, d.D, p.precision, p.qkv_weight_packed, p.proj_weight_packed);
  }
};

}  // namespace nf::ops
