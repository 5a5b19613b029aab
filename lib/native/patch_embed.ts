import type { FloatArray } from './layernorm';

/**
 * Dims of a patch-embedding call: B images of C channels, H x W pixels (NCHW), P x P patches
 * (H and W must be multiples of P), embedding width D; N = (H/P)(W/P) patches per image.
 */
export interface PatchEmbedDims {
  B: number; C: number; H: number; W: number; P: number; D: number;
}

/** ViT patch embedding: a P x P convolution with stride P (see native/cpu/patch_embed.h). */
export interface PatchEmbedOps {
  /**
   * out [B, N, D] = Conv2d(images [B, C, H, W]; weight [D, C, P, P], bias [D], stride P),
   * flattened to patch tokens in row-major patch order.
   */
  patchEmbedForward(a: PatchEmbedDims & {
    out: FloatArray; images: FloatArray; weight: FloatArray; bias: FloatArray;
  }): void;
  /**
   * dweight += doutᵀ patches; dbias += Σ dout; dimages [B, C, H, W] = the input gradient
   * (overwritten; omit it when the images need no gradient). dout is [B, N, D].
   */
  patchEmbedBackward(a: PatchEmbedDims & {
    dimages?: FloatArray | null; dweight: FloatArray; dbias: FloatArray; dout: FloatArray;
    images: FloatArray; weight: FloatArray;
  }): void;
}
