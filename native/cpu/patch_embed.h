// Patch embedding (ViT): a P x P convolution with stride P from NCHW images to patch tokens,
// forward and backward.
#pragma once
#include <cstdint>

#include "kernel_decl.h"

namespace nf::cpu {

struct PatchEmbedDims {
  int64_t B = 0;         // images
  int64_t C = 0;         // channels
  int64_t H = 0, W = 0;  // image height and width, multiples of P
  int64_t P = 0;         // patch side (and stride)
  int64_t D = 0;         // embedding width
};

// out[B, N, D] = patches(images) weightᵀ + bias, N = (H/P)(W/P) patches in row-major order;
// images [B, C, H, W], weight [D, C, P, P], bias [D].
Status patch_embed_forward(float* out, const float* images, const float* weight, const float* bias,
                           PatchEmbedDims d);

// dweight += doutᵀ patches; dbias += Σ dout; dimages = dout weight scattered back to [B, C, H, W]
// (overwritten; skipped when dimages is null, e.g. for input images). The patches are re-gathered
// from the images.
Status patch_embed_backward(float* dimages, float* dweight, float* dbias, const float* dout, const float* images,
                            const float* weight, PatchEmbedDims d);

NF_KERNEL_DECL(void patch_embed_forward(float* out, const float* images, const float* weight, const float* bias,
                                        const PatchEmbedDims& d))
NF_KERNEL_DECL(void patch_embed_backward(float* dimages, float* dweight, float* dbias, const float* dout,
                                         const float* images, const float* weight, const PatchEmbedDims& d))

}  // namespace nf::cpu
