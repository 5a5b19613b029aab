// Parity of the CUDA LayerNorm (forward, fused residual, backward with dadd) with the float64
// reference native/cpu/ref/layernorm.h.
#include "../../cpu/ref/layernorm.h"
#include "../layernorm.h"
#include "parity.h"

namespace {

using namespace nf::test;

struct Case {
  int64_t rows, D;
  bool residual, dadd;
};

NF_TEST(cuda_layernorm_parity) {
  const Case cases[] = {{1, 24, false, false}, {7, 72, true, false}, {65, 96, false, true},
                        {197 * 5, 40, true, true}, {3, 1, false, false}, {2100, 200, false, true}};
  for (const Case& c : cases) {
    const std::string name = dims({{"rows", c.rows}, {"D", c.D}, {"residual", c.residual}, {"dadd", c.dadd}});
    const size_t n = size_t(c.rows * c.D);
    const Vec x = randn(n, 2.0), res = c.residual ? randn(n) : Vec(), gamma = randn(size_t(c.D)),
              beta = randn(size_t(c.D)), dout = randn(n), dadd = c.dadd ? randn(n) : Vec();
    // Reference.
    Vec out(n), sum(c.residual ? n : 0), mean(size_t(c.rows)), rstd(size_t(c.rows));
    nf::ref::layernorm_forward<double>(out.data(), c.residual ? sum.data() : nullptr, mean.data(), rstd.data(),
                                       x.data(), c.residual ? res.data() : nullptr, gamma.data(), beta.data(),
                                       c.rows, c.D, 1e-5);
    const Vec& xin = c.residual ? sum : x;
    Vec dx(n), dgamma(size_t(c.D), 0.5), dbeta(size_t(c.D), -0.25);
    nf::ref::layernorm_backward<double>(dx.data(), dgamma.data(), dbeta.data(), dout.data(),
                                        c.dadd ? dadd.data() : nullptr, xin.data(), mean.data(), rstd.data(),
                                        gamma.data(), c.rows, c.D);
    // CUDA.
    DeviceF d_x(x), d_res(res), d_gamma(gamma), d_beta(beta), d_out(n), d_sum(sum.size()), d_mean(size_t(c.rows)),
        d_rstd(size_t(c.rows));
    const nf::cuda::LayerNormDims d{c.rows, c.D, 1e-5f};
    NF_ASSERT_OK(nf::cuda::layernorm_forward(d_out, c.residual ? d_sum.get() : nullptr, d_mean, d_rstd, d_x,
                                             c.residual ? d_res.get() : nullptr, d_gamma, d_beta, d));
    check_close("layernorm out", name, d_out.download(), out, kFwdTol);
    check_close("layernorm mean", name, d_mean.download(), mean, kFwdTol);
    check_close("layernorm rstd", name, d_rstd.download(), rstd, kFwdTol);
    if (c.residual) check_close("layernorm sum", name, d_sum.download(), sum, kFwdTol);
    DeviceF d_dout(dout), d_dadd(dadd), d_dx(n), d_dgamma(std::vector<float>(size_t(c.D), 0.5f)),
        d_dbeta(std::vector<float>(size_t(c.D), -0.25f));
    // dx aliases dadd when there is one (allowed).
    float* dx_ptr = c.dadd ? d_dadd.get() : d_dx.get();
    NF_ASSERT_OK(nf::cuda::layernorm_backward(dx_ptr, d_dgamma, d_dbeta, d_dout, c.dadd ? d_dadd.get() : nullptr,
                                              c.residual ? d_sum.get() : d_x.get(), d_mean, d_rstd, d_gamma, d));
    check_close("layernorm dx", name, (c.dadd ? d_dadd : d_dx).download(), dx, kBwdTol);
    check_close("layernorm dgamma", name, d_dgamma.download(), dgamma, kBwdTol);
    check_close("layernorm dbeta", name, d_dbeta.download(), dbeta, kBwdTol);
  }
}

NF_TEST(cuda_layernorm_bad_dims) {
  nf::cuda::LayerNormDims d{4, 0, 1e-5f};
  nf::Status st = nf::cuda::layernorm_forward(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                              nullptr, d);
  NF_EXPECT(!st.ok() && st.op == "layernorm_forward" && st.message.find("D") != std::string::npos, st.message);
  d = {4, 8, 0.0f};
  st = nf::cuda::layernorm_backward(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                    nullptr, d);
  NF_EXPECT(!st.ok() && st.message.find("eps") != std::string::npos, st.message);
  d = {4, 100000, 1e-5f};
  st = nf::cuda::layernorm_backward(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                    nullptr, d);
  NF_EXPECT(!st.ok() && st.message.find("too large") != std::string::npos, st.message);
}

}  // namespace
