// Binding for patch embedding: patchEmbedForward / patchEmbedBackward. Float32Array arguments run
// the ISA-dispatched kernels; Float64Array arguments run the float64 reference twin.
#include <string>
#include <type_traits>

#include "../cpu/patch_embed.h"
#include "../cpu/ref/patch_embed.h"
#include "args.h"
#include "registry.h"

namespace nf::napi {
namespace {

// Bounds on each dim, so that no length product (B*C*H*W, B*N*D, D*C*P*P) overflows.
constexpr int64_t kMaxBatch = int64_t(1) << 16, kMaxChannels = int64_t(1) << 12, kMaxSide = int64_t(1) << 14,
                  kMaxWidth = int64_t(1) << 16;

cpu::PatchEmbedDims read_dims(Args& args) {
  cpu::PatchEmbedDims d;
  d.B = args.dim("B", 0, kMaxBatch);
  d.C = args.dim("C", 1, kMaxChannels);
  d.H = args.dim("H", 1, kMaxSide);
  d.W = args.dim("W", 1, kMaxSide);
  d.P = args.dim("P", 1, kMaxSide);
  d.D = args.dim("D", 1, kMaxWidth);
  if (d.H % d.P != 0 || d.W % d.P != 0)
    args.fail("H (" + std::to_string(d.H) + ") and W (" + std::to_string(d.W) + ") must be multiples of P (" +
              std::to_string(d.P) + ")");
  return d;
}

int64_t num_patches(const cpu::PatchEmbedDims& d) { return (d.H / d.P) * (d.W / d.P); }

template <class T>
Job patch_embed_forward(Args& args) {
  const cpu::PatchEmbedDims d = read_dims(args);
  T* out = args.floats<T>("out", d.B * num_patches(d) * d.D);
  const T* images = args.floats<T>("images", d.B * d.C * d.H * d.W);
  const T* weight = args.floats<T>("weight", d.D * d.C * d.P * d.P);
  const T* bias = args.floats<T>("bias", d.D);
  return [=]() -> Status {
    if constexpr (std::is_same_v<T, double>) {
      ref::patch_embed_forward(out, images, weight, bias, d.B, d.C, d.H, d.W, d.P, d.D);
      return Status::Ok();
    } else {
      return cpu::patch_embed_forward(out, images, weight, bias, d);
    }
  };
}

template <class T>
Job patch_embed_backward(Args& args) {
  const cpu::PatchEmbedDims d = read_dims(args);
  T* dimages = args.floats_opt<T>("dimages", d.B * d.C * d.H * d.W);
  T* dweight = args.floats<T>("dweight", d.D * d.C * d.P * d.P);
  T* dbias = args.floats<T>("dbias", d.D);
  const T* dout = args.floats<T>("dout", d.B * num_patches(d) * d.D);
  const T* images = args.floats<T>("images", d.B * d.C * d.H * d.W);
  const T* weight = args.floats<T>("weight", d.D * d.C * d.P * d.P);
  return [=]() -> Status {
    if constexpr (std::is_same_v<T, double>) {
      ref::patch_embed_backward(dimages, dweight, dbias, dout, images, weight, d.B, d.C, d.H, d.W, d.P, d.D);
      return Status::Ok();
    } else {
      return cpu::patch_embed_backward(dimages, dweight, dbias, dout, images, weight, d);
    }
  };
}

Job parse_forward(Args& args) {
  return args.is_f64("images") ? patch_embed_forward<double>(args) : patch_embed_forward<float>(args);
}
Job parse_backward(Args& args) {
  return args.is_f64("images") ? patch_embed_backward<double>(args) : patch_embed_backward<float>(args);
}

}  // namespace

NF_REGISTER_OPS(patch_embed) {
  register_op(env, exports, "patchEmbedForward", parse_forward);
  register_op(env, exports, "patchEmbedBackward", parse_backward);
}

}  // namespace nf::napi
