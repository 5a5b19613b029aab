// Token embeddings, the sinusoidal position table and the ViT token starts on the GPU, forward and
// backward: the ops of native/ops/embedding.h on device pointers (ids included).
#pragma once
#include <cstdint>

#include "../core/status.h"
#include "../ops/embedding.h"

namespace nf::cuda {

using EmbeddingDims = ops::EmbeddingDims;

// out[B*T, D] = table[ids] * scale + pos[t] (pos optional, [>= T, D], first T rows used). Waits for
// the stream to report an id outside [0, V) as an error naming its position, before writing.
Status run(const ops::EmbeddingForward<float>& p);

// dtable[ids[r]] += scale * dout[r] (scatter-add, deterministic: each column's rows are added in
// order); dpos[t] += Σ_b dout[b, t] (optional). Checks the ids as the forward.
Status run(const ops::EmbeddingBackward<float>& p);

// ViTClassifier: out[B, N+1, D] = cat(cls [D], patches [B, N, D]) + pos [N+1, D].
Status run(const ops::ClsPosForward<float>& p);
Status run(const ops::ClsPosForward<ops::bf16>& p);

// dcls [D] += Σ_b dout[b, 0]; dpatches [B, N, D] = dout[:, 1:] (overwritten); dpos [N+1, D] += Σ_b dout[b].
Status run(const ops::ClsPosBackward<float>& p);
Status run(const ops::ClsPosBackward<ops::bf16>& p);

// out[len, D]: PE[p, 2i] = sin(p / 10000^(2i/D)), PE[p, 2i+1] = cos(...), in double, rounded to float.
Status run(const ops::SinusoidalEncoding<float>& p);

// ViTDecoder: out[B, N, D] = token [D] + pos [N, D].
Status run(const ops::TokenPosForward<float>& p);

// dpos [N, D] += Σ_b dout[b]; dtoken [D] += Σ_n (Σ_b dout[b, n]) (deterministic: fixed order).
Status run(const ops::TokenPosBackward<float>& p);

}  // namespace nf::cuda
