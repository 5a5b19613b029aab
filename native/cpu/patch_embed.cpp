// Patch embedding, forward and backward: im2col (one gather pass) + one Linear GEMM.
// Math: patch n = (gy, gx) of image b is the vector p[(c*P + py)*P + px] = img[b, c, gy*P + py, gx*P + px]
//   (the flattening of weight [D, C, P, P]); out[b, n] = weight p + bias, i.e. Conv2d(kernel P,
//   stride P) flattened to [B, N, D]. Backward: dweight += doutᵀ patches; dbias += Σ dout;
//   dpatches = dout weight, scattered back to the pixels they came from (the patches tile the
//   image exactly, so every pixel is written once).
// Layout: images/dimages [B, C, H, W] (NCHW); patches [B*N, K] (row b*N + gy*Gw + gx); out/dout
//   [B, N, D]; weight [D, K]; bias [D]. The patch matrix is not saved: forward gathers it into the
//   calling thread's scratch slot `layer`, backward gathers it again (and keeps dpatches in `tile`).
// Dimension key: B images, C channels, H x W pixels, P patch side, Gh = H/P, Gw = W/P, N = Gh*Gw,
//   K = C*P*P, D embedding width.
#include "patch_embed.h"

#include <cstring>
#include <string>

#include "../core/allocator.h"
#include "../core/threadpool.h"
#include "linear.h"
#include "isa.h"

namespace nf::cpu::NF_ISA_NS {
#include "simd.h"

namespace {

// Calls copy(pat, img) for every run of P pixels: patches + pat (P consecutive columns of one
// patch row) and images + img (P consecutive pixels of one image row) hold the same values.
// Threads split the rows of patches (b, gy).
template <class Copy>
void for_each_run(const PatchEmbedDims& d, Copy copy) {
  const int64_t P = d.P, Gh = d.H / P, Gw = d.W / P, K = d.C * P * P;
  parallel_for(d.B * Gh, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {  // t = b*Gh + gy, so patch row (t*Gw + gx) = b*N + gy*Gw + gx
      const int64_t b = t / Gh, gy = t % Gh;
      for (int64_t c = 0; c < d.C; ++c)
        for (int64_t py = 0; py < P; ++py) {
          const int64_t img = ((b * d.C + c) * d.H + gy * P + py) * d.W;
          for (int64_t gx = 0; gx < Gw; ++gx) copy((t * Gw + gx) * K + (c * P + py) * P, img + gx * P);
        }
    }
  });
}

float* patch_matrix(ScratchSlot slot, const PatchEmbedDims& d) {
  return static_cast<float*>(thread_scratch(slot, sizeof(float) * d.B * d.C * d.H * d.W));
}

float* gather_patches(const float* images, const PatchEmbedDims& d) {
  float* patches = patch_matrix(ScratchSlot::layer, d);
  const size_t run = sizeof(float) * d.P;
  for_each_run(d, [&](int64_t pat, int64_t img) { std::memcpy(patches + pat, images + img, run); });
  return patches;
}

LinearDims linear_dims(const PatchEmbedDims& d) { return {d.B * (d.H / d.P) * (d.W / d.P), d.C * d.P * d.P, d.D}; }

}  // namespace

void patch_embed_forward(const ops::PatchEmbedForward<float>& p) {
  const PatchEmbedDims& d = p.d;
  PackedB int8;  // precision 'int8': the weight quantized per call (about K·D operations, against B·N·K·D)
  int8.int8 = p.precision == ops::Precision::int8;
  NF_ISA_NS::linear_forward(p.out, nullptr, gather_patches(p.images, d), p.weight, p.bias, linear_dims(d), Act::none, int8,
                            p.precision);
}

void patch_embed_backward(const ops::PatchEmbedBackward<float>& p) {
  const PatchEmbedDims& d = p.d;
  float* dpatches = p.dimages ? patch_matrix(ScratchSlot::tile, d) : nullptr;
  NF_ISA_NS::linear_backward(dpatches, p.dweight, p.dbias, p.dout, gather_patches(p.images, d), p.weight,
                             linear_dims(d), p.precision);
  if (!p.dimages) return;
  const size_t run = sizeof(float) * d.P;
  for_each_run(d, [&](int64_t pat, int64_t img) { std::memcpy(p.dimages + img, dpatches + pat, run); });
}

}  // namespace nf::cpu::NF_ISA_NS

#ifdef NF_ISA_PRIMARY
namespace nf::cpu {

// The shared checks, then the scratch the kernels take: the patch matrix, and its gradient when
// the images get one.
static Status patch_embed_check(const char* op, const PatchEmbedDims& d, bool image_grad) {
  NF_TRY(ops::patch_embed_check(op, d));
  const size_t bytes = sizeof(float) * d.B * d.C * d.H * d.W;
  NF_CHECK(d.B == 0 || thread_scratch(ScratchSlot::layer, bytes), op, "out of memory for the patch matrix");
  NF_CHECK(d.B == 0 || !image_grad || thread_scratch(ScratchSlot::tile, bytes), op, "out of memory for the patch gradients");
  return Status::Ok();
}

Status run(const ops::PatchEmbedForward<float>& p) {
  NF_CHECK(p.precision != ops::Precision::int8 || p.d.C * p.d.P * p.d.P <= kMaxInt8K, "patch_embed_forward",
           "precision 'int8' takes at most " + std::to_string(kMaxInt8K) + " values per patch (C · P · P)");
  NF_TRY(patch_embed_check("patch_embed_forward", p.d, false));
  if (p.d.B == 0) return Status::Ok();
  NF_DISPATCH(patch_embed_forward, p);
  return Status::Ok();
}

Status run(const ops::PatchEmbedBackward<float>& p) {
  NF_TRY(ops::int8_inference_check("patch_embed_backward", p.precision, "a backward"));
  NF_TRY(patch_embed_check("patch_embed_backward", p.d, p.dimages != nullptr));
  if (p.d.B == 0) return Status::Ok();
  NF_DISPATCH(patch_embed_backward, p);
  return Status::Ok();
}

}  // namespace nf::cpu
#endif
#include "isa_end.h"
