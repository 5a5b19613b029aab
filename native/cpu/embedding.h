// Token embedding with positions, the sinusoidal position table, and the ViT token starts
// (CLS token + patches + pos_embed; mask token + pos_embed), forward and backward.
#pragma once
#include <cstdint>

#include "kernel_decl.h"

namespace nf::cpu {

struct EmbeddingDims {
  int64_t B = 0, T = 0;  // ids are [B, T]
  int64_t V = 0;         // vocabulary: rows of the table
  int64_t D = 0;         // model width
  float scale = 1.0f;    // sqrt(D) with scale_embedding, else 1
};

// Fails, naming the first offending position, unless every id lies in [0, V).
Status embedding_check_ids(const char* op, const int32_t* ids, const EmbeddingDims& d);

// out[B*T, D] = table[ids] * scale + pos[t]; pos (optional) holds at least T rows of D (the first
// T of a learned pos_embed or of the sinusoidal table). Checks every id before writing anything.
Status embedding_forward(float* out, const int32_t* ids, const float* table, const float* pos, EmbeddingDims d);

// dtable[ids[r]] += scale * dout[r] (scatter-add); dpos[t] += Σ_b dout[b, t] when dpos is given.
Status embedding_backward(float* dtable, float* dpos, const float* dout, const int32_t* ids, EmbeddingDims d);

// out[len, D]: PE[pos, 2i] = sin(pos / 10000^(2i/D)), PE[pos, 2i+1] = cos(pos / 10000^(2i/D)),
// computed in double and rounded to float (any D, odd included, as torch_reference.py).
Status sinusoidal_encoding(float* out, int64_t len, int64_t D);

struct TokenPosDims {
  int64_t B = 0;  // batch
  int64_t N = 0;  // patches (ViTClassifier) or patch positions (ViTDecoder)
  int64_t D = 0;  // model width
};

// ViTClassifier: out[B, N+1, D] = cat(cls [D], patches [B, N, D]) + pos [N+1, D].
Status cls_pos_forward(float* out, const float* cls, const float* patches, const float* pos, TokenPosDims d);
// dcls += Σ_b dout[b, 0]; dpatches = dout[:, 1:] (overwritten); dpos += Σ_b dout.
Status cls_pos_backward(float* dcls, float* dpatches, float* dpos, const float* dout, TokenPosDims d);

// ViTDecoder: out[B, N, D] = token [D] + pos [N, D] (the mask token at every position).
Status token_pos_forward(float* out, const float* token, const float* pos, TokenPosDims d);
// dtoken += Σ_{b,n} dout[b, n]; dpos += Σ_b dout.
Status token_pos_backward(float* dtoken, float* dpos, const float* dout, TokenPosDims d);

NF_KERNEL_DECL(void embedding_forward(float* out, const int32_t* ids, const float* table, const float* pos,
                                      const EmbeddingDims& d))
NF_KERNEL_DECL(void embedding_backward(float* dtable, float* dpos, const float* dout, const int32_t* ids,
                                       const EmbeddingDims& d))
NF_KERNEL_DECL(void cls_pos_forward(float* out, const float* cls, const float* patches, const float* pos,
                                    const TokenPosDims& d))
NF_KERNEL_DECL(void cls_pos_backward(float* dcls, float* dpatches, float* dpos, const float* dout,
                                     const TokenPosDims& d))
NF_KERNEL_DECL(void token_pos_forward(float* out, const float* token, const float* pos, const TokenPosDims& d))
NF_KERNEL_DECL(void token_pos_backward(float* dtoken, float* dpos, const float* dout, const TokenPosDims& d))

}  // namespace nf::cpu
