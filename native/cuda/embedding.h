// Token embeddings and the ViT token starts on the GPU, forward and backward, with the arguments and
// semantics of native/cpu/embedding.h on device pointers (ids included).
#pragma once
#include <cstdint>

#include "../core/status.h"
#include "../cpu/embedding.h"  // the dims structs, shared with the CPU kernels

namespace nf::cuda {

using EmbeddingDims = cpu::EmbeddingDims;

// out[B*T, D] = table[ids] * scale + pos[t] (pos optional, [>= T, D], first T rows used). Waits for
// the stream to report an id outside [0, V) as an error naming its position, before writing.
Status embedding_forward(float* out, const int32_t* ids, const float* table, const float* pos, EmbeddingDims d);

// dtable[ids[r]] += scale * dout[r] (scatter-add, deterministic: each column's rows are added in
// order); dpos[t] += Σ_b dout[b, t] (optional). Checks the ids as embedding_forward.
Status embedding_backward(float* dtable, float* dpos, const float* dout, const int32_t* ids, EmbeddingDims d);

// ViTClassifier: out[B, N+1, D] = cat(cls [D], patches [B, N, D]) + pos [N+1, D].
Status cls_pos_forward(float* out, const float* cls, const float* patches, const float* pos, int64_t B, int64_t N,
                       int64_t D);

// dcls [D] += Σ_b dout[b, 0]; dpatches [B, N, D] = dout[:, 1:] (overwritten); dpos [N+1, D] += Σ_b dout[b].
Status cls_pos_backward(float* dcls, float* dpatches, float* dpos, const float* dout, int64_t B, int64_t N, int64_t D);

}  // namespace nf::cuda
