// Reference embeddings and positions: plain scalar loops, double accumulators, templated on the
// storage type. The ops, math and layouts: native/ops/embedding.h; ids must already be checked
// (ops::embedding_check_ids).
#pragma once
#include <cmath>
#include <cstdint>

#include "../../ops/embedding.h"

namespace nf::ref {

// out[B*T, D] = table[ids] * scale + pos[t] (pos optional)
template <class T>
void run(const ops::EmbeddingForward<T>& p) {
  T* out = p.out;
  const int32_t* ids = p.ids;
  const T *table = p.table, *pos = p.pos;
  const int64_t B = p.d.B, Tn = p.d.T, D = p.d.D;
  const double scale = p.d.scale;
  for (int64_t r = 0; r < B * Tn; ++r)
    for (int64_t i = 0; i < D; ++i)
      out[r * D + i] = static_cast<T>(double(table[ids[r] * D + i]) * scale + (pos ? double(pos[(r % Tn) * D + i]) : 0.0));
}

// dtable[v] += scale Σ_{r: ids[r]=v} dout[r]; dpos[t] += Σ_b dout[b, t] (dpos optional)
template <class T>
void run(const ops::EmbeddingBackward<T>& p) {
  T *dtable = p.dtable, *dpos = p.dpos;
  const T* dout = p.dout;
  const int32_t* ids = p.ids;
  const int64_t B = p.d.B, Tn = p.d.T, D = p.d.D;
  const double scale = p.d.scale;
  for (int64_t r = 0; r < B * Tn; ++r)  // accumulates in T: the tests run it in double
    for (int64_t i = 0; i < D; ++i) dtable[ids[r] * D + i] += static_cast<T>(scale * double(dout[r * D + i]));
  if (dpos)
    for (int64_t t = 0; t < Tn; ++t)
      for (int64_t i = 0; i < D; ++i) {
        double s = 0;
        for (int64_t b = 0; b < B; ++b) s += dout[(b * Tn + t) * D + i];
        dpos[t * D + i] += static_cast<T>(s);
      }
}

// PE[p, 2i] = sin(p / 10000^(2i/D)), PE[p, 2i+1] = cos(p / 10000^(2i/D)), [len, D]
template <class T>
void run(const ops::SinusoidalEncoding<T>& p) {
  const int64_t len = p.len, D = p.D;
  for (int64_t i = 0; i < len; ++i)
    for (int64_t j = 0; j < D; ++j) {
      double a = double(i) / std::pow(10000.0, double(j - j % 2) / double(D));
      p.out[i * D + j] = static_cast<T>(j % 2 ? std::cos(a) : std::sin(a));
    }
}

// out[B, N+1, D] = cat(cls, patches[b]) + pos
template <class T>
void run(const ops::ClsPosForward<T>& p) {
  T* out = p.out;
  const T *cls = p.cls, *patches = p.patches, *pos = p.pos;
  const int64_t B = p.d.B, N = p.d.N, D = p.d.D;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t <= N; ++t)
      for (int64_t i = 0; i < D; ++i) {
        double x = t == 0 ? cls[i] : patches[(b * N + t - 1) * D + i];
        out[(b * (N + 1) + t) * D + i] = static_cast<T>(x + pos[t * D + i]);
      }
}

// dcls += Σ_b dout[b, 0]; dpatches[b, n] = dout[b, 1+n]; dpos += Σ_b dout[b]
template <class T>
void run(const ops::ClsPosBackward<T>& p) {
  T *dcls = p.dcls, *dpatches = p.dpatches, *dpos = p.dpos;
  const T* dout = p.dout;
  const int64_t B = p.d.B, N = p.d.N, D = p.d.D;
  for (int64_t t = 0; t <= N; ++t)
    for (int64_t i = 0; i < D; ++i) {
      double s = 0;
      for (int64_t b = 0; b < B; ++b) {
        s += dout[(b * (N + 1) + t) * D + i];
        if (t > 0) dpatches[(b * N + t - 1) * D + i] = dout[(b * (N + 1) + t) * D + i];
      }
      dpos[t * D + i] += static_cast<T>(s);
      if (t == 0) dcls[i] += static_cast<T>(s);
    }
}

// out[B, N, D] = token + pos
template <class T>
void run(const ops::TokenPosForward<T>& p) {
  T* out = p.out;
  const T *token = p.token, *pos = p.pos;
  const int64_t B = p.d.B, N = p.d.N, D = p.d.D;
  for (int64_t r = 0; r < B * N; ++r)
    for (int64_t i = 0; i < D; ++i) out[r * D + i] = static_cast<T>(double(token[i]) + pos[(r % N) * D + i]);
}

// dtoken += Σ_{b,n} dout[b, n]; dpos[n] += Σ_b dout[b, n]
template <class T>
void run(const ops::TokenPosBackward<T>& p) {
  T *dtoken = p.dtoken, *dpos = p.dpos;
  const T* dout = p.dout;
  const int64_t B = p.d.B, N = p.d.N, D = p.d.D;
  for (int64_t i = 0; i < D; ++i) {
    double all = 0;
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t b = 0; b < B; ++b) s += dout[(b * N + n) * D + i];
      dpos[n * D + i] += static_cast<T>(s);
      all += s;
    }
    dtoken[i] += static_cast<T>(all);
  }
}

}  // namespace nf::ref
