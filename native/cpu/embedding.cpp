// Embeddings and positions, forward and backward.
// Math:
//   Token embedding: out[b,t] = table[ids[b,t]] * scale + pos[t] (pos optional);
//     dtable[v] += scale Σ_{(b,t): ids[b,t]=v} dout[b,t];  dpos[t] += Σ_b dout[b,t].
//   Sinusoidal table: PE[p, j] = sin(p / 10000^(2⌊j/2⌋/D)) for even j, cos(...) for odd j (double).
//   ViTClassifier start: out[b,0] = cls + pos[0], out[b,1+n] = patches[b,n] + pos[1+n];
//     dcls += Σ_b dout[b,0];  dpatches[b,n] = dout[b,1+n];  dpos[t] += Σ_b dout[b,t].
//   ViTDecoder start: out[b,n] = token + pos[n];  dtoken += Σ_{b,n} dout[b,n];  dpos[n] += Σ_b dout[b,n].
// Layout: row-major; ids [B,T] int32; table [V,D]; pos [>=T, D] (only the first T rows are read or
//   written); out/dout [B,T,D] (token) or [B,N+1,D] (cls) or [B,N,D] (mask token).
// Dimension key: B batch, T tokens, V vocabulary, D width, N patches.
// Threads split rows in the forwards. The backwards' sums over the batch (and the scatter-add
// into the table) split the columns of D into blocks each thread owns: race-free, no scratch.
#include "embedding.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "../core/allocator.h"
#include "../core/threadpool.h"
#include "isa.h"

namespace nf::cpu::NF_ISA_NS {
#include "simd.h"

namespace {

// Columns per block owned by one thread in the backwards: 256 bytes, a whole number of vectors.
constexpr int64_t kCols = 64;

// o[0:D] = x * s + y (y optional: then o = x * s).
void scale_add_row(float* o, const float* x, float s, const float* y, int64_t D) {
  vf vs = vset1(s);
  int64_t i = 0;
  if (y) {
    for (; i + W <= D; i += W) vstore(o + i, vfma(vload(x + i), vs, vload(y + i)));
    for (; i < D; ++i) o[i] = std::fma(x[i], s, y[i]);
  } else {
    for (; i + W <= D; i += W) vstore(o + i, vmul(vload(x + i), vs));
    for (; i < D; ++i) o[i] = x[i] * s;
  }
}

// Over columns [c0, c1) (at most kCols) of dout [B, R, D]: S_t = Σ_b dout[b, t]; dpos[t] += S_t
// for t < R (when dpos is given); dfirst += Σ_{t < nfirst} S_t (when dfirst is given).
// Row t's slices of the B batches are read once each, whole cache lines at a time.
void batch_sums(float* dpos, float* dfirst, int64_t nfirst, const float* dout, int64_t B, int64_t R, int64_t D,
                int64_t c0, int64_t c1) {
  vf first[kCols / W];
  for (vf& f : first) f = vzero();
  for (int64_t t = 0; t < R; ++t)
    for (int64_t c = c0, k = 0; c < c1; c += W, ++k) {
      const int w = static_cast<int>(std::min<int64_t>(W, c1 - c));
      vf s = vzero();
      for (int64_t b = 0; b < B; ++b) s = vadd(s, vload_w(dout + (b * R + t) * D + c, w));
      if (dpos) vstore_w(dpos + t * D + c, vadd(vload_w(dpos + t * D + c, w), s), w);
      if (t < nfirst) first[k] = vadd(first[k], s);
    }
  if (dfirst)
    for (int64_t c = c0, k = 0; c < c1; c += W, ++k) {
      const int w = static_cast<int>(std::min<int64_t>(W, c1 - c));
      vstore_w(dfirst + c, vadd(vload_w(dfirst + c, w), first[k]), w);
    }
}

// Runs f(c0, c1) over the column blocks of D on the thread pool.
template <class F>
void for_column_blocks(int64_t D, F&& f) {
  parallel_for((D + kCols - 1) / kCols, [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) f(blk * kCols, std::min(D, (blk + 1) * kCols));
  });
}

}  // namespace

void embedding_forward(const ops::EmbeddingForward<float>& p) {
  const EmbeddingDims& d = p.d;
  float* out = p.out;
  const int32_t* ids = p.ids;
  const float *table = p.table, *pos = p.pos;
  const float scale = static_cast<float>(d.scale);
  const int64_t D = d.D, T = d.T;
  parallel_for(d.B * T, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      scale_add_row(out + r * D, table + int64_t(ids[r]) * D, scale, pos ? pos + (r % T) * D : nullptr, D);
  });
}

void embedding_backward(const ops::EmbeddingBackward<float>& p) {
  const EmbeddingDims& d = p.d;
  float *dtable = p.dtable, *dpos = p.dpos;
  const float* dout = p.dout;
  const int32_t* ids = p.ids;
  const int64_t D = d.D, rows = d.B * d.T;
  const vf vs = vset1(static_cast<float>(d.scale));
  for_column_blocks(D, [&](int64_t c0, int64_t c1) {
    for (int64_t r = 0; r < rows; ++r) {
      float* dt = dtable + int64_t(ids[r]) * D;
      const float* g = dout + r * D;
      for (int64_t c = c0; c < c1; c += W) {
        const int w = static_cast<int>(std::min<int64_t>(W, c1 - c));
        vstore_w(dt + c, vfma(vload_w(g + c, w), vs, vload_w(dt + c, w)), w);
      }
    }
    if (dpos) batch_sums(dpos, nullptr, 0, dout, d.B, d.T, D, c0, c1);
  });
}

void cls_pos_forward(const ops::ClsPosForward<float>& p) {
  const TokenPosDims& d = p.d;
  float* out = p.out;
  const float *cls = p.cls, *patches = p.patches, *pos = p.pos;
  const int64_t D = d.D, R = d.N + 1;
  parallel_for(d.B * R, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / R, t = r % R;
      scale_add_row(out + r * D, t == 0 ? cls : patches + (b * d.N + t - 1) * D, 1.0f, pos + t * D, D);
    }
  });
}

void cls_pos_backward(const ops::ClsPosBackward<float>& p) {
  const TokenPosDims& d = p.d;
  float *dcls = p.dcls, *dpatches = p.dpatches, *dpos = p.dpos;
  const float* dout = p.dout;
  const int64_t D = d.D, R = d.N + 1;
  parallel_for(d.B * d.N, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / d.N, n = r % d.N;
      std::memcpy(dpatches + r * D, dout + (b * R + 1 + n) * D, sizeof(float) * D);
    }
  });
  for_column_blocks(D, [&](int64_t c0, int64_t c1) { batch_sums(dpos, dcls, 1, dout, d.B, R, D, c0, c1); });
}

void token_pos_forward(const ops::TokenPosForward<float>& p) {
  const TokenPosDims& d = p.d;
  float* out = p.out;
  const float *token = p.token, *pos = p.pos;
  const int64_t D = d.D;
  parallel_for(d.B * d.N, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) scale_add_row(out + r * D, token, 1.0f, pos + (r % d.N) * D, D);
  });
}

void token_pos_backward(const ops::TokenPosBackward<float>& p) {
  const TokenPosDims& d = p.d;
  for_column_blocks(d.D, [&](int64_t c0, int64_t c1) {
    batch_sums(p.dpos, p.dtoken, d.N, p.dout, d.B, d.N, d.D, c0, c1);
  });
}

}  // namespace nf::cpu::NF_ISA_NS

#ifdef NF_ISA_PRIMARY
namespace nf::cpu {

Status run(const ops::EmbeddingForward<float>& p) {
  NF_TRY(ops::embedding_check("embedding_forward", p.d));
  NF_TRY(ops::embedding_check_ids("embedding_forward", p.ids, p.d));
  NF_DISPATCH(embedding_forward, p);
  return Status::Ok();
}

Status run(const ops::EmbeddingBackward<float>& p) {
  NF_TRY(ops::embedding_check("embedding_backward", p.d));
  NF_TRY(ops::embedding_check_ids("embedding_backward", p.ids, p.d));
  NF_DISPATCH(embedding_backward, p);
  return Status::Ok();
}

Status run(const ops::SinusoidalEncoding<float>& p) {
  const int64_t len = p.len, D = p.D;
  float* out = p.out;
  NF_CHECK(len >= 0, "sinusoidal_encoding", "len must be non-negative");
  NF_CHECK(D >= 1, "sinusoidal_encoding", "D must be at least 1");
  // div[j] = 10000^(2⌊j/2⌋ / D), as reference/torch_reference.py forms it (float64 arange / D, then pow).
  double* div = static_cast<double*>(thread_scratch(ScratchSlot::layer, sizeof(double) * D));
  NF_CHECK(div, "sinusoidal_encoding", "out of memory for the frequency table");
  for (int64_t j = 0; j < D; ++j) div[j] = std::pow(10000.0, double(j - j % 2) / double(D));
  parallel_for(len, 8, [&](int64_t p0, int64_t p1) {
    for (int64_t i = p0; i < p1; ++i)
      for (int64_t j = 0; j < D; ++j) {
        const double a = double(i) / div[j];
        out[i * D + j] = static_cast<float>(j % 2 ? std::cos(a) : std::sin(a));
      }
  });
  return Status::Ok();
}

Status run(const ops::ClsPosForward<float>& p) {
  NF_TRY(ops::token_pos_check("cls_pos_forward", p.d));
  NF_DISPATCH(cls_pos_forward, p);
  return Status::Ok();
}

Status run(const ops::ClsPosBackward<float>& p) {
  NF_TRY(ops::token_pos_check("cls_pos_backward", p.d));
  NF_DISPATCH(cls_pos_backward, p);
  return Status::Ok();
}

Status run(const ops::TokenPosForward<float>& p) {
  NF_TRY(ops::token_pos_check("token_pos_forward", p.d));
  NF_DISPATCH(token_pos_forward, p);
  return Status::Ok();
}

Status run(const ops::TokenPosBackward<float>& p) {
  NF_TRY(ops::token_pos_check("token_pos_backward", p.d));
  NF_DISPATCH(token_pos_backward, p);
  return Status::Ok();
}

}  // namespace nf::cpu
#endif
#include "isa_end.h"
