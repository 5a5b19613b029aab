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
    nf::ops::LayerNormForward<double> rf;
    rf.rows = c.rows, rf.D = c.D;
    rf.out = out.data(), rf.sum = c.residual ? sum.data() : nullptr, rf.mean = mean.data(), rf.rstd = rstd.data();
    rf.x = x.data(), rf.residual = c.residual ? res.data() : nullptr, rf.gamma = gamma.data(), rf.beta = beta.data();
    nf::ref::run(rf);
    const Vec& xin = c.residual ? sum : x;
    Vec dx(n), dgamma(size_t(c.D), 0.5), dbeta(size_t(c.D), -0.25);
    nf::ops::LayerNormBackward<double> rb;
    rb.rows = c.rows, rb.D = c.D;
    rb.dx = dx.data(), rb.dgamma = dgamma.data(), rb.dbeta = dbeta.data(), rb.dout = dout.data();
    rb.dadd = c.dadd ? dadd.data() : nullptr, rb.x = xin.data(), rb.mean = mean.data(), rb.rstd = rstd.data();
    rb.gamma = gamma.data();
    nf::ref::run(rb);
    // CUDA.
    DeviceF d_x(x), d_res(res), d_gamma(gamma), d_beta(beta), d_out(n), d_sum(sum.size()), d_mean(size_t(c.rows)),
        d_rstd(size_t(c.rows));
    nf::ops::LayerNormForward<float> f;
    f.rows = c.rows, f.D = c.D;
    f.out = d_out, f.sum = c.residual ? d_sum.get() : nullptr, f.mean = d_mean, f.rstd = d_rstd;
    f.x = d_x, f.residual = c.residual ? d_res.get() : nullptr, f.gamma = d_gamma, f.beta = d_beta;
    NF_ASSERT_OK(nf::cuda::run(f));
    check_close("layernorm out", name, d_out.download(), out, kFwdTol);
    check_close("layernorm mean", name, d_mean.download(), mean, kFwdTol);
    check_close("layernorm rstd", name, d_rstd.download(), rstd, kFwdTol);
    if (c.residual) check_close("layernorm sum", name, d_sum.download(), sum, kFwdTol);
    DeviceF d_dout(dout), d_dadd(dadd), d_dx(n), d_dgamma(std::vector<float>(size_t(c.D), 0.5f)),
        d_dbeta(std::vector<float>(size_t(c.D), -0.25f));
    // dx aliases dadd when there is one (allowed).
    float* dx_ptr = c.dadd ? d_dadd.get() : d_dx.get();
    nf::ops::LayerNormBackward<float> b;
    b.rows = c.rows, b.D = c.D;
    b.dx = dx_ptr, b.dgamma = d_dgamma, b.dbeta = d_dbeta, b.dout = d_dout, b.dadd = c.dadd ? d_dadd.get() : nullptr;
    b.x = c.residual ? d_sum.get() : d_x.get(), b.mean = d_mean, b.rstd = d_rstd, b.gamma = d_gamma;
    NF_ASSERT_OK(nf::cuda::run(b));
    check_close("layernorm dx", name, (c.dadd ? d_dadd : d_dx).download(), dx, kBwdTol);
    check_close("layernorm dgamma", name, d_dgamma.download(), dgamma, kBwdTol);
    check_close("layernorm dbeta", name, d_dbeta.download(), dbeta, kBwdTol);
  }
}

NF_TEST(cuda_layernorm_bad_dims) {
  nf::ops::LayerNormForward<float> f;
  f.rows = 4, f.D = 0;
  nf::Status st = nf::cuda::run(f);
  NF_EXPECT(!st.ok() && st.op == "layernorm_forward" && st.message.find("D") != std::string::npos, st.message);
  nf::ops::LayerNormBackward<float> b;
  b.rows = 4, b.D = 8, b.eps = 0.0;
  st = nf::cuda::run(b);
  NF_EXPECT(!st.ok() && st.message.find("eps") != std::string::npos, st.message);
  b.D = 100000, b.eps = 1e-5;
  st = nf::cuda::run(b);
  NF_EXPECT(!st.ok() && st.message.find("too large") != std::string::npos, st.message);
}

}  // namespace
