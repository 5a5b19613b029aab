// Binding for embeddings and positions: embeddingForward / embeddingBackward, sinusoidalEncoding,
// clsPosForward / clsPosBackward (ViTClassifier), tokenPosForward / tokenPosBackward (ViTDecoder).
// Float32Array arguments run the ISA-dispatched kernels; Float64Array arguments the reference twin.
#include <cstdint>
#include <type_traits>

#include "../cpu/embedding.h"
#include "../cpu/ref/embedding.h"
#include "args.h"
#include "registry.h"

namespace nf::napi {
namespace {

// B, T, V, D, scale; and maxLen, the rows of the position table (default T, at least T).
struct EmbeddingArgs {
  cpu::EmbeddingDims d;
  double scale;
  int64_t maxLen;
};

EmbeddingArgs embedding_args(Args& a) {
  EmbeddingArgs e;
  e.d.B = a.dim("B", 0);
  e.d.T = a.dim("T", 0);
  e.d.V = a.dim("V", 1, INT32_MAX);
  e.d.D = a.dim("D");
  e.scale = a.number("scale", 1.0);
  e.d.scale = static_cast<float>(e.scale);
  e.maxLen = a.integer("maxLen", e.d.T, e.d.T, int64_t(1) << 40);
  return e;
}

// Every id in [0, V), checked before anything runs; the error names the first bad position.
const int32_t* token_ids(Args& a, const cpu::EmbeddingDims& d) {
  const int32_t* ids = a.ints("ids", a.count({d.B, d.T}));
  Status s = cpu::embedding_check_ids(a.op(), ids, d);
  if (!s.ok()) a.fail(s.message);
  return ids;
}

template <class T>
Job embedding_forward(Args& a) {
  EmbeddingArgs e = embedding_args(a);
  const cpu::EmbeddingDims d = e.d;
  T* out = a.floats<T>("out", a.count({d.B, d.T, d.D}));
  const int32_t* ids = token_ids(a, d);
  const T* table = a.floats<T>("table", a.count({d.V, d.D}));
  const T* pos = a.floats_opt<T>("pos", a.count({e.maxLen, d.D}));
  return [=]() -> Status {
    if constexpr (std::is_same_v<T, double>) {
      ref::embedding_forward(out, ids, table, pos, d.B, d.T, d.D, e.scale);
      return Status::Ok();
    } else {
      return cpu::embedding_forward(out, ids, table, pos, d);
    }
  };
}

template <class T>
Job embedding_backward(Args& a) {
  EmbeddingArgs e = embedding_args(a);
  const cpu::EmbeddingDims d = e.d;
  T* dtable = a.floats<T>("dtable", a.count({d.V, d.D}));
  T* dpos = a.floats_opt<T>("dpos", a.count({e.maxLen, d.D}));
  const T* dout = a.floats<T>("dout", a.count({d.B, d.T, d.D}));
  const int32_t* ids = token_ids(a, d);
  return [=]() -> Status {
    if constexpr (std::is_same_v<T, double>) {
      ref::embedding_backward(dtable, dpos, dout, ids, d.B, d.T, d.D, e.scale);
      return Status::Ok();
    } else {
      return cpu::embedding_backward(dtable, dpos, dout, ids, d);
    }
  };
}

template <class T>
Job sinusoidal_encoding(Args& a) {
  int64_t len = a.dim("len", 0), D = a.dim("D");
  T* out = a.floats<T>("out", a.count({len, D}));
  return [=]() -> Status {
    if constexpr (std::is_same_v<T, double>) {
      ref::sinusoidal_encoding(out, len, D);
      return Status::Ok();
    } else {
      return cpu::sinusoidal_encoding(out, len, D);
    }
  };
}

cpu::TokenPosDims token_pos_dims(Args& a) {
  cpu::TokenPosDims d;
  d.B = a.dim("B", 0);
  d.N = a.dim("N", 0);
  d.D = a.dim("D");
  return d;
}

// The lengths of the ViT token starts, all counted before any array is read: tokens [B, N, D]
// (patches, the token-pos output), with CLS [B, N+1, D], positions [N, D] and [N+1, D].
struct TokenPosLengths {
  int64_t tokens, with_cls, pos, pos_cls;
};

TokenPosLengths token_pos_lengths(Args& a, const cpu::TokenPosDims& d) {
  return {a.count({d.B, d.N, d.D}), a.count({d.B, d.N + 1, d.D}), a.count({d.N, d.D}), a.count({d.N + 1, d.D})};
}

template <class T>
Job cls_pos_forward(Args& a) {
  const cpu::TokenPosDims d = token_pos_dims(a);
  const TokenPosLengths n = token_pos_lengths(a, d);
  T* out = a.floats<T>("out", n.with_cls);
  const T* cls = a.floats<T>("cls", d.D);
  const T* patches = a.floats<T>("patches", n.tokens);
  const T* pos = a.floats<T>("pos", n.pos_cls);
  return [=]() -> Status {
    if constexpr (std::is_same_v<T, double>) {
      ref::cls_pos_forward(out, cls, patches, pos, d.B, d.N, d.D);
      return Status::Ok();
    } else {
      return cpu::cls_pos_forward(out, cls, patches, pos, d);
    }
  };
}

template <class T>
Job cls_pos_backward(Args& a) {
  const cpu::TokenPosDims d = token_pos_dims(a);
  const TokenPosLengths n = token_pos_lengths(a, d);
  T* dcls = a.floats<T>("dcls", d.D);
  T* dpatches = a.floats<T>("dpatches", n.tokens);
  T* dpos = a.floats<T>("dpos", n.pos_cls);
  const T* dout = a.floats<T>("dout", n.with_cls);
  return [=]() -> Status {
    if constexpr (std::is_same_v<T, double>) {
      ref::cls_pos_backward(dcls, dpatches, dpos, dout, d.B, d.N, d.D);
      return Status::Ok();
    } else {
      return cpu::cls_pos_backward(dcls, dpatches, dpos, dout, d);
    }
  };
}

template <class T>
Job token_pos_forward(Args& a) {
  const cpu::TokenPosDims d = token_pos_dims(a);
  const TokenPosLengths n = token_pos_lengths(a, d);
  T* out = a.floats<T>("out", n.tokens);
  const T* token = a.floats<T>("token", d.D);
  const T* pos = a.floats<T>("pos", n.pos);
  return [=]() -> Status {
    if constexpr (std::is_same_v<T, double>) {
      ref::token_pos_forward(out, token, pos, d.B, d.N, d.D);
      return Status::Ok();
    } else {
      return cpu::token_pos_forward(out, token, pos, d);
    }
  };
}

template <class T>
Job token_pos_backward(Args& a) {
  const cpu::TokenPosDims d = token_pos_dims(a);
  const TokenPosLengths n = token_pos_lengths(a, d);
  T* dtoken = a.floats<T>("dtoken", d.D);
  T* dpos = a.floats<T>("dpos", n.pos);
  const T* dout = a.floats<T>("dout", n.tokens);
  return [=]() -> Status {
    if constexpr (std::is_same_v<T, double>) {
      ref::token_pos_backward(dtoken, dpos, dout, d.B, d.N, d.D);
      return Status::Ok();
    } else {
      return cpu::token_pos_backward(dtoken, dpos, dout, d);
    }
  };
}

Job parse_embedding_forward(Args& a) {
  return a.is_f64("table") ? embedding_forward<double>(a) : embedding_forward<float>(a);
}
Job parse_embedding_backward(Args& a) {
  return a.is_f64("dout") ? embedding_backward<double>(a) : embedding_backward<float>(a);
}
Job parse_sinusoidal(Args& a) { return a.is_f64("out") ? sinusoidal_encoding<double>(a) : sinusoidal_encoding<float>(a); }
Job parse_cls_pos_forward(Args& a) { return a.is_f64("pos") ? cls_pos_forward<double>(a) : cls_pos_forward<float>(a); }
Job parse_cls_pos_backward(Args& a) {
  return a.is_f64("dout") ? cls_pos_backward<double>(a) : cls_pos_backward<float>(a);
}
Job parse_token_pos_forward(Args& a) {
  return a.is_f64("pos") ? token_pos_forward<double>(a) : token_pos_forward<float>(a);
}
Job parse_token_pos_backward(Args& a) {
  return a.is_f64("dout") ? token_pos_backward<double>(a) : token_pos_backward<float>(a);
}

}  // namespace

NF_REGISTER_OPS(embedding) {
  register_op(env, exports, "embeddingForward", parse_embedding_forward);
  register_op(env, exports, "embeddingBackward", parse_embedding_backward);
  register_op(env, exports, "sinusoidalEncoding", parse_sinusoidal);
  register_op(env, exports, "clsPosForward", parse_cls_pos_forward);
  register_op(env, exports, "clsPosBackward", parse_cls_pos_backward);
  register_op(env, exports, "tokenPosForward", parse_token_pos_forward);
  register_op(env, exports, "tokenPosBackward", parse_token_pos_backward);
}

}  // namespace nf::napi
