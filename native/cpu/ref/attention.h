// Reference multi-head attention: reference/torch_reference.py's MultiHeadAttention done the straightforward
// way, a full Tq x Tk softmax per head, double accumulators, templated on the storage type: the
// ops of native/ops/attention.h with the same saved buffers (qkv [B, T, 3D] for self-attention,
// q [B, Tq, D] and kv [B, Tk, 2D] for cross-attention; ctx [B, Tq, D]; lse [B, H, Tq]). There is no
// twin of attentionDecode (its reference is the full forward). Dropout draws the same
// Philox elements as the fast kernel (index ((b*H + h)*Tq + i)*Tk + j), so the two agree for any p.
// The backward recomputes the softmax from Q and K (it does not use lse).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "../../core/philox.h"
#include "../../ops/attention.h"
#include "linear.h"

namespace nf::ref {

struct AttentionSpec {
  int64_t B = 0, Tq = 0, Tk = 0, D = 0, H = 0;
  double scale = 0;                      // the scores' scale (ops::softmax_scale)
  bool causal = false;                   // blocks j > i
  const uint8_t* key_padding_mask = nullptr;  // [B, Tk], nonzero = blocked
  const uint8_t* attn_mask = nullptr;    // [Tq, Tk], or [B, Tq, Tk] when attn_batched; nonzero = blocked
  bool attn_batched = false;
  float dropout_p = 0.0f;
  uint64_t seed = 0, offset = 0;

  int64_t Dh() const { return D / H; }
  bool blocked(int64_t b, int64_t i, int64_t j) const {
    return (causal && j > i) || (key_padding_mask && key_padding_mask[b * Tk + j]) ||
           (attn_mask && attn_mask[((attn_batched ? b * Tq : 0) + i) * Tk + j]);
  }
  // The dropout factor Z of weight (b, h, i, j): 1/(1-p) when kept, else 0.
  double keep(int64_t b, int64_t h, int64_t i, int64_t j) const {
    uint64_t index = uint64_t(((b * H + h) * Tq + i) * Tk + j);
    return dropout_keep(seed, offset, index, dropout_p) ? 1.0 / (1.0 - double(dropout_p)) : 0.0;
  }
};

// The spec of a layer op's params.
inline AttentionSpec attention_spec(const ops::AttentionDims& d, const ops::AttentionMasks& m) {
  return {d.B, d.Tq, d.Tk, d.D, d.H, ops::softmax_scale<double>(d.scale, d.D / d.H), m.causal, m.key_padding_mask, m.attn_mask, m.attn_batched,
          d.dropout.p, d.dropout.seed, d.dropout.offset};
}

namespace detail {

// Dh-wide rows of Q, K, V of head (b, h) inside the projection buffers (qkv non-null: self-
// attention; else q and kv). V rows sit D after K rows, with K's row stride.
template <class P>
struct HeadRows {
  P q, k, v;
  int64_t qs, ks;  // row strides
};

template <class P>
HeadRows<P> head_rows(const AttentionSpec& s, P qkv, P q, P kv, int64_t b, int64_t h) {
  const int64_t D = s.D, off = h * s.Dh();
  if (qkv) {
    P base = qkv + b * s.Tq * 3 * D + off;
    return {base, base + D, base + 2 * D, 3 * D, 3 * D};
  }
  P kb = kv + b * s.Tk * 2 * D + off;
  return {q + b * s.Tq * D + off, kb, kb + D, D, 2 * D};
}

// P [Tq, Tk] = softmax over the unblocked keys of scale q_i·k_j; lse [Tq] = log Σ exp(score).
// A row whose keys are all blocked gets P = 0 and lse = -inf.
template <class T>
void softmax_rows(double* P, double* lse, const AttentionSpec& s, const HeadRows<const T*>& r, int64_t b) {
  const double scale = s.scale, ninf = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < s.Tq; ++i) {
    double* p = P + i * s.Tk;
    double m = ninf;
    for (int64_t j = 0; j < s.Tk; ++j) {
      double dot = 0;
      for (int64_t d = 0; d < s.Dh(); ++d) dot += double(r.q[i * r.qs + d]) * double(r.k[j * r.ks + d]);
      p[j] = s.blocked(b, i, j) ? ninf : scale * dot;
      m = std::max(m, p[j]);
    }
    if (m == ninf) {
      for (int64_t j = 0; j < s.Tk; ++j) p[j] = 0;
      lse[i] = ninf;
      continue;
    }
    double sum = 0;
    for (int64_t j = 0; j < s.Tk; ++j) sum += (p[j] = std::exp(p[j] - m));
    for (int64_t j = 0; j < s.Tk; ++j) p[j] /= sum;
    lse[i] = m + std::log(sum);
  }
}

}  // namespace detail

template <class T>
void run(const ops::AttentionForward<T>& p) {
  const AttentionSpec s = attention_spec(p.d, p.m);
  T *out = p.out, *weights = p.weights, *qkv = p.qkv, *q = p.q, *kv = p.kv, *ctx = p.ctx, *lse = p.lse;
  const T *x = p.x, *memory = p.memory, *qkv_weight = p.qkv_weight, *qkv_bias = p.qkv_bias, *proj_weight = p.proj_weight, *proj_bias = p.proj_bias;
  const int64_t D = s.D, Dh = s.Dh(), Tq = s.Tq, Tk = s.Tk;
  if (memory) {
    linear_forward(q, x, qkv_weight, qkv_bias, s.B * Tq, D, D);
    linear_forward(kv, memory, qkv_weight + D * D, qkv_bias ? qkv_bias + D : nullptr, s.B * Tk, D, 2 * D);
  } else {
    linear_forward(qkv, x, qkv_weight, qkv_bias, s.B * Tq, D, 3 * D);
  }
  std::vector<double> P(Tq * Tk), L(Tq), Z(Tk);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h) {
      const auto r = detail::head_rows<const T*>(s, qkv, q, kv, b, h);
      detail::softmax_rows<T>(P.data(), L.data(), s, r, b);
      const int64_t row0 = (b * s.H + h) * Tq;
      for (int64_t i = 0; i < Tq; ++i) {
        lse[row0 + i] = static_cast<T>(L[i]);
        if (weights)
          for (int64_t j = 0; j < Tk; ++j) weights[(row0 + i) * Tk + j] = static_cast<T>(P[i * Tk + j]);
        for (int64_t j = 0; j < Tk; ++j) Z[j] = s.keep(b, h, i, j);
        for (int64_t d = 0; d < Dh; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < Tk; ++j) acc += P[i * Tk + j] * Z[j] * double(r.v[j * r.ks + d]);
          ctx[(b * Tq + i) * D + h * Dh + d] = static_cast<T>(acc);
        }
      }
    }
  linear_forward(out, ctx, proj_weight, proj_bias, s.B * Tq, D, D);
}

template <class T>
void run(const ops::AttentionBackward<T>& p) {
  const AttentionSpec s = attention_spec(p.d, p.m);
  T *dx = p.dx, *dmemory = p.dmemory, *d_qkv_weight = p.d_qkv_weight, *d_qkv_bias = p.d_qkv_bias, *d_proj_weight = p.d_proj_weight, *d_proj_bias = p.d_proj_bias;
  const T *dout = p.dout, *qkv = p.qkv, *q = p.q, *kv = p.kv, *ctx = p.ctx, *x = p.x, *memory = p.memory;
  const T *qkv_weight = p.qkv_weight, *proj_weight = p.proj_weight;
  const int64_t D = s.D, Dh = s.Dh(), Tq = s.Tq, Tk = s.Tk, rq = s.B * Tq, rk = s.B * Tk;
  const double scale = s.scale;
  std::vector<T> dctx(rq * D);
  linear_backward(dctx.data(), d_proj_weight, d_proj_bias, dout, ctx, proj_weight, rq, D, D);
  // Gradients of the projections' outputs, laid out like the saved buffers.
  std::vector<T> grad((rq + 2 * rk) * D, T(0));
  T* gqkv = memory ? nullptr : grad.data();
  T* gq = memory ? grad.data() : nullptr;
  T* gkv = memory ? grad.data() + rq * D : nullptr;
  std::vector<double> P(Tq * Tk), L(Tq), g(Tk);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h) {
      const auto r = detail::head_rows<const T*>(s, qkv, q, kv, b, h);
      const auto dr = detail::head_rows<T*>(s, gqkv, gq, gkv, b, h);
      detail::softmax_rows<T>(P.data(), L.data(), s, r, b);
      for (int64_t i = 0; i < Tq; ++i) {
        const T* dO = dctx.data() + (b * Tq + i) * D + h * Dh;
        const double* p = P.data() + i * Tk;
        double Di = 0;  // Σ_j P_ij dL/dP_ij
        for (int64_t j = 0; j < Tk; ++j) {
          double dov = 0;
          for (int64_t d = 0; d < Dh; ++d) dov += double(dO[d]) * double(r.v[j * r.ks + d]);
          const double z = s.keep(b, h, i, j);
          g[j] = z * dov;
          Di += p[j] * g[j];
          for (int64_t d = 0; d < Dh; ++d) dr.v[j * dr.ks + d] += static_cast<T>(p[j] * z * double(dO[d]));
        }
        for (int64_t j = 0; j < Tk; ++j) {
          const double ds = p[j] * (g[j] - Di) * scale;
          for (int64_t d = 0; d < Dh; ++d) {
            dr.q[i * dr.qs + d] += static_cast<T>(ds * double(r.k[j * r.ks + d]));
            dr.k[j * dr.ks + d] += static_cast<T>(ds * double(r.q[i * r.qs + d]));
          }
        }
      }
    }
  if (memory) {
    linear_backward(dx, d_qkv_weight, d_qkv_bias, gq, x, qkv_weight, rq, D, D);
    linear_backward(dmemory, d_qkv_weight + D * D, d_qkv_bias ? d_qkv_bias + D : nullptr, gkv, memory, qkv_weight + D * D, rk, D, 2 * D);
  } else {
    linear_backward(dx, d_qkv_weight, d_qkv_bias, gqkv, x, qkv_weight, rq, D, 3 * D);
  }
}

}  // namespace nf::ref
