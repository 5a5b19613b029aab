// Token embeddings with positions, the sinusoidal position table, and the ViT token starts (CLS
// token + patches + pos_embed; mask token + pos_embed), forward and backward.
//   Token embedding: out[b,t] = table[ids[b,t]] * scale + pos[t] (pos optional);
//     dtable[v] += scale Σ_{(b,t): ids[b,t]=v} dout[b,t];  dpos[t] += Σ_b dout[b,t].
//   Sinusoidal table: PE[p, 2i] = sin(p / 10000^(2i/D)), PE[p, 2i+1] = cos(p / 10000^(2i/D)).
//   ViTClassifier start: out[b] = cat(cls, patches[b]) + pos; ViTDecoder start: out[b, n] = token + pos[n].
// Shapes are row-major; dims: B batch, T tokens, V vocabulary, D width, N patches. Parameter gradients
// (dtable, dpos, dcls, dtoken) accumulate (+=); dpatches is overwritten.
#pragma once
#include <climits>
#include <cmath>
#include <cstdint>
#include <string>

#include "../core/status.h"
#include "schema.h"

namespace nf::ops {

struct EmbeddingDims {
  int64_t B = 0, T = 0;  // ids are [B, T]
  int64_t V = 0;         // vocabulary: rows of the table
  int64_t D = 0;         // model width
  double scale = 1.0;    // sqrt(D) with scale_embedding, else 1 (the float32 kernels round it)
};

inline Status embedding_check(const char* op, const EmbeddingDims& d) {
  NF_CHECK(d.B >= 0 && d.T >= 0, op, "B and T must be non-negative");
  NF_CHECK(d.V >= 1, op, "V must be at least 1");
  NF_CHECK(d.D >= 1, op, "D must be at least 1");
  NF_CHECK(std::isfinite(d.scale), op, "scale must be finite");
  return Status::Ok();
}

// Fails, naming the first offending position, unless every id lies in [0, V). Host memory only: the
// host readers run it before any work (an invalid argument), the CUDA kernels check on the device.
inline Status embedding_check_ids(const char* op, const int32_t* ids, const EmbeddingDims& d) {
  for (int64_t i = 0; i < d.B * d.T; ++i)
    if (ids[i] < 0 || ids[i] >= d.V)
      return Status::Error(op, "ids[" + std::to_string(i) + "] (batch " + std::to_string(i / d.T) + ", position " +
                                   std::to_string(i % d.T) + ") is " + std::to_string(ids[i]) +
                                   ", outside the vocabulary [0, " + std::to_string(d.V) + ")");
  return Status::Ok();
}

// B, T, V, D, scale; and maxLen, the rows of the position table (default T, at least T).
template <class R>
void embedding_dims(R& r, EmbeddingDims& d, int64_t& max_len) {
  r.dim(d.B, "B", 0);
  r.dim(d.T, "T", 0);
  r.dim(d.V, "V", 1, INT32_MAX);
  r.dim(d.D, "D");
  r.number(d.scale, "scale", 1.0);
  r.integer(max_len, "maxLen", d.T, d.T, kMaxDim);
}

template <class R>
void token_ids(R& r, const int32_t*& ids, const EmbeddingDims& d) {
  r.in(ids, "ids", NF_SHAPE(d.B, d.T), doc("each in [0, V) (else an Error naming the first bad position)"));
  r.check_values([&] { return embedding_check_ids("embedding", ids, d); });
}

template <class T>
struct EmbeddingForward {
  static constexpr const char* name = "embeddingForward";
  static constexpr const char* summary =
      "out[B*T, D] = table[ids] * scale + pos[t], as Encoder/Decoder's `embed(tokens) * scale + positions[:T]`. "
      "ids: Int32Array [B, T], each in [0, V) (else an Error naming the first bad position, before anything is "
      "written); table [V, D]; pos (optional) [maxLen, D] of which the first T rows are used (a learned pos_embed "
      "or the sinusoidal table); maxLen defaults to T. scale defaults to 1 (sqrt(D) with scale_embedding).";
  EmbeddingDims d;
  int64_t max_len = 0;
  T* out = nullptr;
  const int32_t* ids = nullptr;
  const T* table = nullptr;
  const T* pos = nullptr;

  template <class R>
  static void fields(R& r, EmbeddingForward& p) {
    embedding_dims(r, p.d, p.max_len);
    const EmbeddingDims& d = p.d;
    r.out(p.out, "out", NF_SHAPE(d.B, d.T, d.D));
    token_ids(r, p.ids, d);
    r.in(p.table, "table", NF_SHAPE(d.V, d.D));
    r.in(p.pos, "pos", Shape("[maxLen, D]", p.max_len, d.D), optional);
  }
};

template <class T>
struct EmbeddingBackward {
  static constexpr const char* name = "embeddingBackward";
  static constexpr const char* summary =
      "dtable[ids[b,t]] += scale * dout[b,t] (scatter-add); dpos[t] += Σ_b dout[b,t] for t < T (optional: learned "
      "positions only). dtable [V, D], dpos [maxLen, D], dout [B*T, D].";
  EmbeddingDims d;
  int64_t max_len = 0;
  T* dtable = nullptr;
  T* dpos = nullptr;
  const T* dout = nullptr;
  const int32_t* ids = nullptr;

  template <class R>
  static void fields(R& r, EmbeddingBackward& p) {
    embedding_dims(r, p.d, p.max_len);
    const EmbeddingDims& d = p.d;
    r.inout(p.dtable, "dtable", NF_SHAPE(d.V, d.D), grad_of("table"));
    r.inout(p.dpos, "dpos", Shape("[maxLen, D]", p.max_len, d.D), optional, grad_of("pos"));
    r.in(p.dout, "dout", NF_SHAPE(d.B, d.T, d.D), grad_of("out"));
    token_ids(r, p.ids, d);
  }
};

template <class T>
struct SinusoidalEncoding {
  static constexpr const char* name = "sinusoidalEncoding";
  static constexpr const char* summary =
      "out[len, D]: PE[p, 2i] = sin(p / 10000^(2i/D)), PE[p, 2i+1] = cos(p / 10000^(2i/D)), computed in double (a "
      "Float32Array receives it rounded to float32); odd D as reference/torch_reference.py.";
  int64_t len = 0, D = 0;
  T* out = nullptr;

  template <class R>
  static void fields(R& r, SinusoidalEncoding& p) {
    r.dim(p.len, "len", 0);
    r.dim(p.D, "D");
    r.out(p.out, "out", NF_SHAPE(p.len, p.D));
  }
};

// The ViT token starts: B batch, N patches (ViTClassifier) or patch positions (ViTDecoder), D width.
struct TokenPosDims {
  int64_t B = 0, N = 0, D = 0;
};

inline Status token_pos_check(const char* op, const TokenPosDims& d) {
  NF_CHECK(d.B >= 0 && d.N >= 0, op, "B and N must be non-negative");
  NF_CHECK(d.D >= 1, op, "D must be at least 1");
  return Status::Ok();
}

template <class R>
void token_pos_dims(R& r, TokenPosDims& d) {
  r.dim(d.B, "B", 0);
  r.dim(d.N, "N", 0);
  r.dim(d.D, "D");
  r.count(NF_SHAPE(d.B, d.N + 1, d.D));  // the largest length, so dims that overflow fail before any array
}

template <class T>
struct ClsPosForward {
  static constexpr const char* name = "clsPosForward";
  static constexpr const char* summary = "ViTClassifier: out[B, N+1, D] = cat(cls [D], patches [B, N, D]) + pos [N+1, D].";
  TokenPosDims d;
  T* out = nullptr;
  const Acc<T>* cls = nullptr;
  const T* patches = nullptr;
  const Acc<T>* pos = nullptr;

  template <class R>
  static void fields(R& r, ClsPosForward& p) {
    token_pos_dims(r, p.d);
    const TokenPosDims& d = p.d;
    r.out(p.out, "out", NF_SHAPE(d.B, d.N + 1, d.D));
    r.in(p.cls, "cls", NF_SHAPE(d.D));
    r.in(p.patches, "patches", NF_SHAPE(d.B, d.N, d.D));
    r.in(p.pos, "pos", NF_SHAPE(d.N + 1, d.D));
  }
};

template <class T>
struct ClsPosBackward {
  static constexpr const char* name = "clsPosBackward";
  static constexpr const char* summary =
      "dcls [D] += Σ_b dout[b, 0]; dpatches [B, N, D] = dout[:, 1:] (overwritten); dpos [N+1, D] += Σ_b dout[b].";
  TokenPosDims d;
  Acc<T>* dcls = nullptr;
  T* dpatches = nullptr;
  Acc<T>* dpos = nullptr;
  const T* dout = nullptr;

  template <class R>
  static void fields(R& r, ClsPosBackward& p) {
    token_pos_dims(r, p.d);
    const TokenPosDims& d = p.d;
    r.inout(p.dcls, "dcls", NF_SHAPE(d.D), grad_of("cls"));
    r.out(p.dpatches, "dpatches", NF_SHAPE(d.B, d.N, d.D), grad_of("patches"));
    r.inout(p.dpos, "dpos", NF_SHAPE(d.N + 1, d.D), grad_of("pos"));
    r.in(p.dout, "dout", NF_SHAPE(d.B, d.N + 1, d.D), grad_of("out"));
  }
};

template <class T>
struct TokenPosForward {
  static constexpr const char* name = "tokenPosForward";
  static constexpr const char* summary =
      "ViTDecoder: out[B, N, D] = token [D] + pos [N, D] (mask_token.expand(B, N, -1) + pos_embed).";
  TokenPosDims d;
  T* out = nullptr;
  const T* token = nullptr;
  const T* pos = nullptr;

  template <class R>
  static void fields(R& r, TokenPosForward& p) {
    token_pos_dims(r, p.d);
    const TokenPosDims& d = p.d;
    r.out(p.out, "out", NF_SHAPE(d.B, d.N, d.D));
    r.in(p.token, "token", NF_SHAPE(d.D));
    r.in(p.pos, "pos", NF_SHAPE(d.N, d.D));
  }
};

template <class T>
struct TokenPosBackward {
  static constexpr const char* name = "tokenPosBackward";
  static constexpr const char* summary = "dtoken [D] += Σ_{b,n} dout[b, n]; dpos [N, D] += Σ_b dout[b].";
  TokenPosDims d;
  T* dtoken = nullptr;
  T* dpos = nullptr;
  const T* dout = nullptr;

  template <class R>
  static void fields(R& r, TokenPosBackward& p) {
    token_pos_dims(r, p.d);
    const TokenPosDims& d = p.d;
    r.inout(p.dtoken, "dtoken", NF_SHAPE(d.D), grad_of("token"));
    r.inout(p.dpos, "dpos", NF_SHAPE(d.N, d.D), grad_of("pos"));
    r.in(p.dout, "dout", NF_SHAPE(d.B, d.N, d.D), grad_of("out"));
  }
};

}  // namespace nf::ops
