// Parity of the CUDA LayerNorm (forward, fused residual, backward with dadd) with the float64
// reference native/cpu/ref/layernorm.h, at widths that reach each backward instantiation (a warp per
// row holding 4, 8, 16, 24 or 32 columns a lane: D up to 128, 256, 512, 768, 1,024; a block per row
// above, up to 6,144), and the backward's bits run to run.
#include <cstring>

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
  const Case cases[] = {{1, 24, false, false},   {7, 72, true, false},     {65, 96, false, true},
                        {197 * 5, 40, true, true}, {3, 1, false, false},     {2100, 200, false, true},
                        {37, 300, true, false},    {130, 768, true, true},   {21, 1000, false, true},
                        {40, 1100, true, true},    {3, 6144, false, false}};
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

// The backward twice on the same inputs, and on the same dγ, dβ starting values: equal bits (the
// per-block partial sums and their sum over blocks run in a fixed order, no float atomics), with rows
// past one per warp of the grid (each warp walks several) and a block-per-row width.
NF_TEST(cuda_layernorm_backward_deterministic) {
  for (const int64_t D : {40, 768, 1100}) {
    const int64_t rows = D > 1024 ? 300 : 2100;
    const std::string name = dims({{"rows", rows}, {"D", D}});
    const size_t n = size_t(rows * D);
    const Vec x = randn(n, 2.0), gamma = randn(size_t(D)), dout = randn(n), dadd = randn(n);
    DeviceF d_x(x), d_gamma(gamma), d_dout(dout), d_mean{size_t(rows)}, d_rstd{size_t(rows)}, d_out{n};
    nf::ops::LayerNormForward<float> f;
    f.rows = rows, f.D = D, f.out = d_out, f.mean = d_mean, f.rstd = d_rstd, f.x = d_x, f.gamma = d_gamma;
    f.beta = d_gamma;
    NF_ASSERT_OK(nf::cuda::run(f));
    std::vector<float> first[3];
    for (int run = 0; run < 2; ++run) {
      DeviceF d_dadd(dadd), d_dgamma(std::vector<float>(size_t(D), 0.5f)),
          d_dbeta(std::vector<float>(size_t(D), -0.25f));
      nf::ops::LayerNormBackward<float> b;
      b.rows = rows, b.D = D, b.dx = d_dadd, b.dgamma = d_dgamma, b.dbeta = d_dbeta, b.dout = d_dout, b.dadd = d_dadd;
      b.x = d_x, b.mean = d_mean, b.rstd = d_rstd, b.gamma = d_gamma;
      NF_ASSERT_OK(nf::cuda::run(b));
      const std::vector<float> got[3] = {d_dadd.download(), d_dgamma.download(), d_dbeta.download()};
      for (int i = 0; i < 3; ++i)
        if (run == 0) first[i] = got[i];
        else NF_EXPECT(std::memcmp(first[i].data(), got[i].data(), first[i].size() * sizeof(float)) == 0,
                       "layernorm backward bits differ between runs (0 dx, 1 dgamma, 2 dbeta: " + std::to_string(i) +
                           "), " + name);
    }
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
