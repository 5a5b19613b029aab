// Parity of the CUDA patch embedding (im2col + GEMM forward, col2im backward) with the float64
// reference native/cpu/ref/patch_embed.h.
#include <type_traits>

#include "../../cpu/ref/patch_embed.h"
#include "../patch_embed.h"
#include "parity.h"

namespace {

using namespace nf::test;

NF_TEST(cuda_patch_embed_parity) {
  struct Case {
    int64_t B, C, H, W, P, D;
    bool dimages;
  };
  const Case cases[] = {{1, 1, 4, 4, 4, 24, true}, {3, 3, 12, 12, 4, 48, true}, {2, 3, 8, 12, 2, 40, false},
                        {5, 2, 6, 6, 3, 7, true}};
  for (const Case& c : cases) {
    const std::string name = dims({{"B", c.B}, {"C", c.C}, {"H", c.H}, {"W", c.W}, {"P", c.P}, {"D", c.D}});
    const int64_t N = (c.H / c.P) * (c.W / c.P), K = c.C * c.P * c.P;
    const size_t ni = size_t(c.B * c.C * c.H * c.W), no = size_t(c.B * N * c.D), nw = size_t(c.D * K);
    const Vec images = randn(ni), weight = randn(nw, 0.2), bias = randn(size_t(c.D)), dout = randn(no);
    const nf::ops::PatchEmbedDims d{c.B, c.C, c.H, c.W, c.P, c.D};
    // The ops' params on either precision's buffers.
    const auto forward = [&d](auto* out, const auto* images, const auto* weight, const auto* bias) {
      nf::ops::PatchEmbedForward<std::remove_pointer_t<decltype(out)>> f;
      f.d = d, f.out = out, f.images = images, f.weight = weight, f.bias = bias;
      return f;
    };
    const auto backward = [&d](auto* dimages, auto* dweight, auto* dbias, const auto* dout, const auto* images,
                               const auto* weight) {
      nf::ops::PatchEmbedBackward<std::remove_pointer_t<decltype(dweight)>> b;
      b.d = d, b.dimages = dimages, b.dweight = dweight, b.dbias = dbias, b.dout = dout, b.images = images;
      b.weight = weight;
      return b;
    };
    Vec out(no), dimages(ni), dweight(nw, 0.5), dbias(size_t(c.D), -0.25);
    nf::ref::run(forward(out.data(), images.data(), weight.data(), bias.data()));
    nf::ref::run(backward(c.dimages ? dimages.data() : nullptr, dweight.data(), dbias.data(), dout.data(),
                          images.data(), weight.data()));
    DeviceF d_images(images), d_weight(weight), d_bias(bias), d_out(no), d_dout(dout), d_dimages(ni),
        d_dweight(std::vector<float>(nw, 0.5f)), d_dbias(std::vector<float>(size_t(c.D), -0.25f));
    NF_ASSERT_OK(nf::cuda::run(forward(d_out.get(), d_images.get(), d_weight.get(), d_bias.get())));
    check_close("patch_embed out", name, d_out.download(), out, kFwdTol);
    NF_ASSERT_OK(nf::cuda::run(backward(c.dimages ? d_dimages.get() : nullptr, d_dweight.get(), d_dbias.get(),
                                        d_dout.get(), d_images.get(), d_weight.get())));
    if (c.dimages) check_close("patch_embed dimages", name, d_dimages.download(), dimages, kBwdTol);
    check_close("patch_embed dweight", name, d_dweight.download(), dweight, kBwdTol);
    check_close("patch_embed dbias", name, d_dbias.download(), dbias, kBwdTol);
  }
}

NF_TEST(cuda_patch_embed_bad_dims) {
  nf::ops::PatchEmbedForward<float> f;
  f.d = {1, 3, 10, 12, 4, 8};
  const nf::Status st = nf::cuda::run(f);
  NF_EXPECT(!st.ok() && st.op == "patch_embed_forward" && st.message.find("multiples of P") != std::string::npos,
            st.message);
}

}  // namespace
