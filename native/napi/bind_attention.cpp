// Binding for multi-head attention: attentionForward / attentionBackward (fields documented in
// lib/native/attention.ts). Self-attention when `memory` is absent, cross-attention otherwise.
// Float32Array arguments run the ISA-dispatched kernels; Float64Array arguments run the float64
// reference twin.
#include <type_traits>

#include "../cpu/attention.h"
#include "../cpu/ref/attention.h"
#include "args.h"
#include "registry.h"

namespace nf::napi {
namespace {

// What both ops read: dims, memory (cross-attention), masks and dropout.
template <class T>
struct Common {
  cpu::AttentionDims d;
  cpu::AttentionMasks m;
  const T* memory = nullptr;

  ref::AttentionSpec spec() const {
    return {d.B, d.Tq, d.Tk, d.D, d.H, m.causal, m.key_padding, m.attn, m.attn_batched,
            d.dropout.p, d.dropout.seed, d.dropout.offset};
  }
};

template <class T>
Common<T> parse_common(Args& a) {
  Common<T> c;
  cpu::AttentionDims& d = c.d;
  d.B = a.dim("B"), d.Tq = a.dim("Tq"), d.Tk = a.integer("Tk", d.Tq, 1, int64_t(1) << 40);
  d.D = a.dim("D"), d.H = a.dim("H");
  if (d.D % d.H != 0)
    a.fail("D (" + std::to_string(d.D) + ") must be divisible by H (" + std::to_string(d.H) + ")");
  c.memory = a.floats_opt<T>("memory", a.count({d.B, d.Tk, d.D}));
  if (!c.memory && d.Tk != d.Tq)
    a.fail("self-attention (no memory) needs Tk == Tq, but Tk = " + std::to_string(d.Tk) + " and Tq = " +
           std::to_string(d.Tq));
  c.m.causal = a.flag("causal", false);
  c.m.key_padding = a.bools_opt("keyPaddingMask", a.count({d.B, d.Tk}));
  // attnMask is [Tq, Tk] (shared by the batch) or [B, Tq, Tk]; its length tells which.
  c.m.attn_batched = d.B > 1 && a.length("attnMask") == a.count({d.B, d.Tq, d.Tk});
  c.m.attn = a.bools_opt("attnMask", c.m.attn_batched ? a.count({d.B, d.Tq, d.Tk}) : a.count({d.Tq, d.Tk}));
  const double p = a.number("dropoutP", 0.0, 0.0, 1.0);
  if (p >= 1.0) a.fail("expected dropoutP in [0, 1) but received 1");
  d.dropout.p = static_cast<float>(p);
  d.dropout.seed = static_cast<uint64_t>(a.integer("seed", 0, 0, (int64_t(1) << 53) - 1));
  d.dropout.offset = static_cast<uint64_t>(a.integer("offset", 0, 0, (int64_t(1) << 53) - 1));
  return c;
}

// The array lengths both ops check, each through Args::count so no product overflows.
struct Lengths {
  int64_t q, k, qkv, kv, lse, wqkv, wproj;
};

Lengths lengths(Args& a, const cpu::AttentionDims& d) {
  return {a.count({d.B, d.Tq, d.D}), a.count({d.B, d.Tk, d.D}), a.count({3, d.B, d.Tq, d.D}),
          a.count({2, d.B, d.Tk, d.D}), a.count({d.B, d.H, d.Tq}), a.count({3, d.D, d.D}), a.count({d.D, d.D})};
}

template <class T>
Job attention_forward(Args& a) {
  const Common<T> c = parse_common<T>(a);
  const cpu::AttentionDims& d = c.d;
  const Lengths n = lengths(a, d);
  T* out = a.floats<T>("out", n.q);
  T* weights = a.floats_opt<T>("weights", a.count({d.B, d.H, d.Tq, d.Tk}));
  T* qkv = c.memory ? nullptr : a.floats<T>("qkv", n.qkv);
  T* q = c.memory ? a.floats<T>("q", n.q) : nullptr;
  T* kv = c.memory ? a.floats<T>("kv", n.kv) : nullptr;
  T* ctx = a.floats<T>("ctx", n.q);
  T* lse = a.floats<T>("lse", n.lse);
  const T* x = a.floats<T>("x", n.q);
  const T* Wqkv = a.floats<T>("qkvWeight", n.wqkv);
  const T* bqkv = a.floats_opt<T>("qkvBias", a.count({3, d.D}));
  const T* Wproj = a.floats<T>("projWeight", n.wproj);
  const T* bproj = a.floats_opt<T>("projBias", d.D);
  return [=]() -> Status {
    if constexpr (std::is_same_v<T, double>) {
      ref::attention_forward(out, weights, qkv, q, kv, ctx, lse, x, c.memory, c.spec(), Wqkv, bqkv, Wproj, bproj);
      return Status::Ok();
    } else {
      return cpu::attention_forward(out, weights, qkv, q, kv, ctx, lse, x, c.memory, c.m, Wqkv, bqkv, Wproj, bproj,
                                    d);
    }
  };
}

template <class T>
Job attention_backward(Args& a) {
  const Common<T> c = parse_common<T>(a);
  const cpu::AttentionDims& d = c.d;
  const Lengths n = lengths(a, d);
  T* dx = a.floats<T>("dx", n.q);
  T* dmemory = a.floats_opt<T>("dMemory", n.k);
  if (dmemory && !c.memory) a.fail("dMemory is only for cross-attention (with memory)");
  T* dWqkv = a.floats<T>("dQkvWeight", n.wqkv);
  T* dbqkv = a.floats_opt<T>("dQkvBias", a.count({3, d.D}));
  T* dWproj = a.floats<T>("dProjWeight", n.wproj);
  T* dbproj = a.floats_opt<T>("dProjBias", d.D);
  const T* dout = a.floats<T>("dout", n.q);
  const T* qkv = c.memory ? nullptr : a.floats<T>("qkv", n.qkv);
  const T* q = c.memory ? a.floats<T>("q", n.q) : nullptr;
  const T* kv = c.memory ? a.floats<T>("kv", n.kv) : nullptr;
  const T* ctx = a.floats<T>("ctx", n.q);
  const T* lse = a.floats<T>("lse", n.lse);
  const T* x = a.floats<T>("x", n.q);
  const T* Wqkv = a.floats<T>("qkvWeight", n.wqkv);
  const T* Wproj = a.floats<T>("projWeight", n.wproj);
  return [=]() -> Status {
    if constexpr (std::is_same_v<T, double>) {
      ref::attention_backward(dx, dmemory, dWqkv, dbqkv, dWproj, dbproj, dout, qkv, q, kv, ctx, lse, x, c.memory,
                              c.spec(), Wqkv, Wproj);
      return Status::Ok();
    } else {
      return cpu::attention_backward(dx, dmemory, dWqkv, dbqkv, dWproj, dbproj, dout, qkv, q, kv, ctx, lse, x,
                                     c.memory, c.m, Wqkv, Wproj, d);
    }
  };
}

Job parse_forward(Args& a) { return a.is_f64("x") ? attention_forward<double>(a) : attention_forward<float>(a); }
Job parse_backward(Args& a) { return a.is_f64("x") ? attention_backward<double>(a) : attention_backward<float>(a); }

}  // namespace

// attentionDecode: one incremental-decoding step (float32 only; its reference is the full
// forward, which the generate tests compare against).
Job parse_decode(Args& a) {
  cpu::AttentionDecodeDims d;
  d.B = a.dim("B"), d.D = a.dim("D"), d.H = a.dim("H");
  if (d.D % d.H != 0) a.fail("D (" + std::to_string(d.D) + ") must be divisible by H (" + std::to_string(d.H) + ")");
  const bool self = a.length("cache") >= 0;
  if (self == (a.length("kv") >= 0)) a.fail("expected exactly one of cache (self-attention) and kv (cross-attention)");
  float* cache = nullptr;
  const float* kv = nullptr;
  const uint8_t* key_padding = nullptr;
  if (self) {
    d.max_t = a.dim("maxT"), d.t = a.dim("t", 0, d.max_t - 1);
    cache = a.floats<float>("cache", a.count({d.B, d.max_t, 2, d.D}));
  } else {
    d.Tk = a.dim("Tk");
    kv = a.floats<float>("kv", a.count({d.B, d.Tk, 2, d.D}));
    key_padding = a.bools_opt("keyPaddingMask", a.count({d.B, d.Tk}));
  }
  float* out = a.floats<float>("out", a.count({d.B, d.D}));
  const float* x = a.floats<float>("x", a.count({d.B, d.D}));
  const float* Wqkv = a.floats<float>("qkvWeight", a.count({3, d.D, d.D}));
  const float* bqkv = a.floats_opt<float>("qkvBias", a.count({3, d.D}));
  const float* Wproj = a.floats<float>("projWeight", a.count({d.D, d.D}));
  const float* bproj = a.floats_opt<float>("projBias", d.D);
  return [=]() { return cpu::attention_decode(out, cache, kv, x, key_padding, Wqkv, bqkv, Wproj, bproj, d); };
}

NF_REGISTER_OPS(attention) {
  register_op(env, exports, "attentionDecode", parse_decode);
  register_op(env, exports, "attentionForward", parse_forward);
  register_op(env, exports, "attentionBackward", parse_backward);
}

}  // namespace nf::napi
