// Patch embedding (ViT, reference/torch_reference.py PatchEmbedding): a P x P convolution with stride P from
// NCHW images to patch tokens, forward and backward.
//   out[b, gy*Gw + gx, o] = bias[o] + Σ_{c,py,px} weight[o, c, py, px] img[b, c, gy*P + py, gx*P + px]
//   Backward: dweight += doutᵀ patches; dbias += Σ dout; dimages = dout weight scattered back
//   (overwritten; skipped when dimages is null, e.g. for input images).
// Layout: images [B, C, H, W]; weight [D, C, P, P]; bias [D]; out [B, N, D], N = (H/P)(W/P) patches in
// row-major patch order.
#pragma once
#include <cstdint>
#include <string>

#include "../core/status.h"
#include "precision.h"
#include "schema.h"

namespace nf::ops {

struct PatchEmbedDims {
  int64_t B = 0;         // images
  int64_t C = 0;         // channels
  int64_t H = 0, W = 0;  // image height and width, multiples of P
  int64_t P = 0;         // patch side (and stride)
  int64_t D = 0;         // embedding width
};

inline Status patch_embed_check(const char* op, const PatchEmbedDims& d) {
  NF_CHECK(d.B >= 0, op, "B must be non-negative");
  NF_CHECK(d.C >= 1 && d.H >= 1 && d.W >= 1 && d.P >= 1 && d.D >= 1, op, "C, H, W, P and D must be at least 1");
  NF_CHECK(d.H % d.P == 0 && d.W % d.P == 0, op,
           "H (" + std::to_string(d.H) + ") and W (" + std::to_string(d.W) + ") must be multiples of P (" +
               std::to_string(d.P) + ")");
  return Status::Ok();
}

// Plausibility bounds on each dim, so an absurd image size is rejected naming the dim; the array
// lengths go through the reader's count, which rules out overflow whatever the dims.
constexpr int64_t kMaxImages = int64_t(1) << 16, kMaxChannels = int64_t(1) << 12, kMaxSide = int64_t(1) << 14,
                  kMaxEmbedding = int64_t(1) << 16;

template <class R>
void patch_embed_dims(R& r, PatchEmbedDims& d) {
  r.dim(d.B, "B", 0, kMaxImages);
  r.dim(d.C, "C", 1, kMaxChannels);
  r.dim(d.H, "H", 1, kMaxSide);
  r.dim(d.W, "W", 1, kMaxSide);
  r.dim(d.P, "P", 1, kMaxSide);
  r.dim(d.D, "D", 1, kMaxEmbedding);
  if (d.H % d.P != 0 || d.W % d.P != 0)
    r.fail("H (" + std::to_string(d.H) + ") and W (" + std::to_string(d.W) + ") must be multiples of P (" +
           std::to_string(d.P) + ")");
}

template <class T>
struct PatchEmbedForward {
  static constexpr const char* name = "patchEmbedForward";
  static constexpr const char* summary =
      "out [B, N, D] = Conv2d(images [B, C, H, W]; weight [D, C, P, P], bias [D], stride P), flattened to patch "
      "tokens in row-major patch order: B images of C channels, H x W pixels (NCHW), P x P patches (H and W "
      "multiples of P), N = (H/P)(W/P).";
  PatchEmbedDims d;
  Precision precision = Precision::fp32;
  T* out = nullptr;
  const Acc<T>* images = nullptr;
  const T* weight = nullptr;
  const Acc<T>* bias = nullptr;
  const T* bias_rounded = nullptr;

  template <class R>
  static void fields(R& r, PatchEmbedForward& p) {
    patch_embed_dims(r, p.d);
    precision_field(r, p.precision);
    const PatchEmbedDims& d = p.d;
    r.out(p.out, "out", Shape("[B, N, D]", d.B, d.H / d.P, d.W / d.P, d.D));
    r.in(p.images, "images", NF_SHAPE(d.B, d.C, d.H, d.W));
    r.in(p.weight, "weight", NF_SHAPE(d.D, d.C, d.P, d.P));
    r.in(p.bias, "bias", NF_SHAPE(d.D));
    r.in(p.bias_rounded, "biasRounded", NF_SHAPE(d.D), optional, doc(kRoundedBiasDoc));
  }
};

template <class T>
struct PatchEmbedBackward {
  static constexpr const char* name = "patchEmbedBackward";
  static constexpr const char* summary =
      "dweight += doutᵀ patches; dbias += Σ dout; dimages [B, C, H, W] = the input gradient (overwritten; omit it "
      "when the images need no gradient). dout is [B, N, D].";
  PatchEmbedDims d;
  Precision precision = Precision::fp32;
  Acc<T>* dimages = nullptr;
  Acc<T>* dweight = nullptr;
  Acc<T>* dbias = nullptr;
  const T* dout = nullptr;
  const Acc<T>* images = nullptr;
  const T* weight = nullptr;

  template <class R>
  static void fields(R& r, PatchEmbedBackward& p) {
    patch_embed_dims(r, p.d);
    precision_field(r, p.precision);
    const PatchEmbedDims& d = p.d;
    r.out(p.dimages, "dimages", NF_SHAPE(d.B, d.C, d.H, d.W), optional, grad_of("images"));
    r.inout(p.dweight, "dweight", NF_SHAPE(d.D, d.C, d.P, d.P), grad_of("weight"));
    r.inout(p.dbias, "dbias", NF_SHAPE(d.D), grad_of("bias"));
    r.in(p.dout, "dout", Shape("[B, N, D]", d.B, d.H / d.P, d.W / d.P, d.D), grad_of("out"));
    r.in(p.images, "images", NF_SHAPE(d.B, d.C, d.H, d.W));
    r.in(p.weight, "weight", NF_SHAPE(d.D, d.C, d.P, d.P));
  }
};

}  // namespace nf::ops
