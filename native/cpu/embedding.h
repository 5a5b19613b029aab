// Token embedding with positions, the sinusoidal position table, and the ViT token starts
// (CLS token + patches + pos_embed; mask token + pos_embed), forward and backward.
#pragma once
#include <cstdint>

#include "../ops/embedding.h"
#include "kernel_decl.h"

namespace nf::cpu {

using EmbeddingDims = ops::EmbeddingDims;
using TokenPosDims = ops::TokenPosDims;

// The ops (native/ops/embedding.h).
// embeddingForward: out[B*T, D] = table[ids] * scale + pos[t]; pos (optional) holds at least T rows
// of D. Checks every id before writing anything. embeddingBackward: dtable[ids[r]] += scale *
// dout[r] (scatter-add); dpos[t] += Σ_b dout[b, t] when dpos is given.
Status run(const ops::EmbeddingForward<float>& p);
Status run(const ops::EmbeddingBackward<float>& p);
// out[len, D]: the sinusoidal table computed in double and rounded to float (any D, odd included).
Status run(const ops::SinusoidalEncoding<float>& p);
// ViTClassifier: out[B, N+1, D] = cat(cls [D], patches [B, N, D]) + pos [N+1, D]; backward: dcls +=
// Σ_b dout[b, 0]; dpatches = dout[:, 1:] (overwritten); dpos += Σ_b dout.
Status run(const ops::ClsPosForward<float>& p);
Status run(const ops::ClsPosBackward<float>& p);
// ViTDecoder: out[B, N, D] = token [D] + pos [N, D]; backward: dtoken += Σ_{b,n} dout[b, n]; dpos += Σ_b dout.
Status run(const ops::TokenPosForward<float>& p);
Status run(const ops::TokenPosBackward<float>& p);

NF_KERNEL_DECL(void embedding_forward(const ops::EmbeddingForward<float>& p))
NF_KERNEL_DECL(void embedding_backward(const ops::EmbeddingBackward<float>& p))
NF_KERNEL_DECL(void cls_pos_forward(const ops::ClsPosForward<float>& p))
NF_KERNEL_DECL(void cls_pos_backward(const ops::ClsPosBackward<float>& p))
NF_KERNEL_DECL(void token_pos_forward(const ops::TokenPosForward<float>& p))
NF_KERNEL_DECL(void token_pos_backward(const ops::TokenPosBackward<float>& p))

}  // namespace nf::cpu
