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

// Plausibility bounds on each dim, so an absurd image size is rejected naming the dim; the array
// lengths below go through Args::count, which rules out overflow whatever the dims.
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

// The array lengths: out/dout [B, N, D], images [B, C, H, W], weight [D, C, P, P].
struct Lengths {
  int64_t out, images, weight;
};

Lengths lengths(Args& args, const cpu::PatchEmbedDims& d) {
  return {args.count({d.B, d.H / d.P, d.W / d.P, d.D}), args.count({d.B, d.C, d.H, d.W}),
          args.count({d.D, d.C, d.P, d.P})};
}

template <class T>
Job patch_embed_forward(Args& args) {
  const cpu::PatchEmbedDims d = read_dims(args);
  const Lengths n = lengths(args, d);
  T* out = args.floats<T>("out", n.out);
  const T* images = args.floats<T>("images", n.images);
  const T* weight = args.floats<T>("weight", n.weight);
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
  const Lengths n = lengths(args, d);
  T* dimages = args.floats_opt<T>("dimages", n.images);
  T* dweight = args.floats<T>("dweight", n.weight);
  T* dbias = args.floats<T>("dbias", d.D);
  const T* dout = args.floats<T>("dout", n.out);
  const T* images = args.floats<T>("images", n.images);
  const T* weight = args.floats<T>("weight", n.weight);
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
