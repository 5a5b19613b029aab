// Parity of the CUDA elementwise ops (add in place and out of place, dropout forward and backward
// with the CPU's Philox mask, strided row copies) with the float64 references
// native/cpu/ref/elementwise.h.
#include "../../cpu/ref/elementwise.h"
#include "../elementwise.h"
#include "parity.h"

namespace {

using namespace nf::test;

NF_TEST(cuda_elementwise_parity) {
  for (int64_t n : {1, 7, 1000, 4099}) {
    const std::string name = dims({{"n", n}});
    const Vec a = randn(size_t(n)), b = randn(size_t(n));
    Vec sum(a.size());
    nf::ref::add(sum.data(), a.data(), b.data(), n);
    DeviceF d_a(a), d_b(b), d_out(a.size());
    NF_ASSERT_OK(nf::cuda::add(d_out, d_a, d_b, n));
    check_close("add out", name, d_out.download(), sum, kFwdTol);
    NF_ASSERT_OK(nf::cuda::add(d_a, d_a, d_b, n));  // y += x
    check_close("add in place", name, d_a.download(), sum, kFwdTol);
    for (float p : {0.0f, 0.1f, 0.5f}) {
      Vec dropped(a.size());
      nf::ref::dropout(dropped.data(), b.data(), n, p, 1234567, 89);
      NF_ASSERT_OK(nf::cuda::dropout(d_out, d_b, n, p, 1234567, 89));
      check_close("dropout out", name + " p=" + std::to_string(p), d_out.download(), dropped, kFwdTol);
    }
  }
  NF_EXPECT(!nf::cuda::dropout(nullptr, nullptr, 4, 1.0f, 0, 0).ok(), "p = 1 is rejected");
}

NF_TEST(cuda_copy_rows_parity) {
  // The CLS rows of [B, T, D] tokens out to [B, D], and back into a zeroed [B, T, D].
  const int64_t B = 3, T = 10, D = 24;
  const Vec tokens = randn(size_t(B * T * D));
  Vec cls(size_t(B * D)), back(tokens.size(), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < D; ++i) cls[size_t(b * D + i)] = back[size_t(b * T * D + i)] = tokens[size_t(b * T * D + i)];
  DeviceF d_tokens(tokens), d_cls(cls.size()), d_back(Vec(tokens.size(), 0.0));
  NF_ASSERT_OK(nf::cuda::copy_rows(d_cls, D, d_tokens, T * D, B, D));
  check_close("copy_rows out", dims({{"B", B}, {"T", T}, {"D", D}}), d_cls.download(), cls, kFwdTol);
  NF_ASSERT_OK(nf::cuda::copy_rows(d_back, T * D, d_cls, D, B, D));
  check_close("copy_rows back", dims({{"B", B}, {"T", T}, {"D", D}}), d_back.download(), back, kFwdTol);
  NF_EXPECT(!nf::cuda::copy_rows(d_cls, 4, d_tokens, T * D, B, D).ok(), "a stride below cols is rejected");
}

}  // namespace
