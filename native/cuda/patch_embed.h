// Patch embedding on the GPU (a P x P convolution with stride P, flattened to tokens), forward and
// backward: the ops of native/ops/patch_embed.h on device pointers.
#pragma once
#include <cstdint>

#include "../core/status.h"
#include "../ops/patch_embed.h"

namespace nf::cuda {

using PatchEmbedDims = ops::PatchEmbedDims;

// out[B, N, D] (N = (H/P)(W/P), row-major patch order) = patches · weightᵀ + bias; weight [D, C, P, P],
// bias [D].
Status run(const ops::PatchEmbedForward<float>& p);
Status run(const ops::PatchEmbedForward<ops::bf16>& p);

// dimages (optional, overwritten) [B, C, H, W]; dweight [D, C, P, P] and dbias [D] accumulate.
Status run(const ops::PatchEmbedBackward<float>& p);
Status run(const ops::PatchEmbedBackward<ops::bf16>& p);

}  // namespace nf::cuda
