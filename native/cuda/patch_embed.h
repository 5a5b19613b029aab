// Patch embedding on the GPU (a P x P convolution with stride P, flattened to tokens), forward and
// backward, with the arguments and semantics of native/cpu/patch_embed.h on device pointers.
#pragma once
#include <cstdint>

#include "../core/status.h"
#include "../cpu/patch_embed.h"  // the dims structs, shared with the CPU kernels

namespace nf::cuda {

using PatchEmbedDims = cpu::PatchEmbedDims;

// out[B, N, D] (N = (H/P)(W/P), row-major patch order) = patches · weightᵀ + bias; weight [D, C, P, P],
// bias [D].
Status patch_embed_forward(float* out, const float* images, const float* weight, const float* bias, PatchEmbedDims d);

// dimages (optional, overwritten) [B, C, H, W]; dweight [D, C, P, P] and dbias [D] accumulate.
Status patch_embed_backward(float* dimages, float* dweight, float* dbias, const float* dout, const float* images,
                            const float* weight, PatchEmbedDims d);

}  // namespace nf::cuda
