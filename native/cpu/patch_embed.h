// Patch embedding (ViT): a P x P convolution with stride P from NCHW images to patch tokens,
// forward and backward.
#pragma once
#include <cstdint>

#include "../ops/patch_embed.h"
#include "kernel_decl.h"

namespace nf::cpu {

using PatchEmbedDims = ops::PatchEmbedDims;

// The ops (native/ops/patch_embed.h): out[B, N, D] = patches(images) weightᵀ + bias; and its
// backward: dweight += doutᵀ patches; dbias += Σ dout; dimages = dout weight scattered back to
// [B, C, H, W] (overwritten; skipped when dimages is null). The patches are re-gathered from the images.
Status run(const ops::PatchEmbedForward<float>& p);
Status run(const ops::PatchEmbedBackward<float>& p);

NF_KERNEL_DECL(void patch_embed_forward(const ops::PatchEmbedForward<float>& p))
NF_KERNEL_DECL(void patch_embed_backward(const ops::PatchEmbedBackward<float>& p))

}  // namespace nf::cpu
