// Parity of the CUDA kernels of precision 'bf16' (activations stored in bfloat16, fp32 parameters,
// statistics, losses and gradients of parameters, fp32 math) with the float64 references of
// native/cpu/ref. The reference reads exactly what the kernels read: the bf16 inputs' rounded
// values and the bf16 copy of a weight (rounded) as doubles; what it does not see is the rounding
// of the kernels' own bf16 outputs and saved intermediates. Tolerances (relative, ‖Δ‖/‖ref‖):
// 1e-2 forward, 3e-2 gradients. A bf16 value is within 2^-9 of its float (relative), so one
// rounding of an output costs about 2^-9/√3 ≈ 1.1e-3 RMS; a backward meets a few (the saved
// activations, the incoming gradient, the bf16 input gradient of a product) and compounds them
// through products over hundreds of terms, hence the looser gradient bound. Shapes are awkward on
// purpose (odd rows, widths 20 and 40, T = 197) so the vector paths' tails run too. The cuBLASLt
// path (with the stand-in, CUDA_R_16BF operands) and the own kernel's both run: the suite runs with
// and without NF_CUBLASLT_PATH (test/cuda_emulator.test.ts).
#include <cstring>
#include <type_traits>

#include "../../cpu/ref/elementwise.h"
#include "../../cpu/ref/embedding.h"
#include "../../cpu/ref/feedforward.h"
#include "../../cpu/ref/layernorm.h"
#include "../../cpu/ref/linear.h"
#include "../../cpu/ref/loss.h"
#include "../../cpu/ref/patch_embed.h"
#include "../bf16.h"
#include "../elementwise.h"
#include "../embedding.h"
#include "../feedforward.h"
#include "../gemm.h"
#include "../layernorm.h"
#include "../linear.h"
#include "../loss.h"
#include "../patch_embed.h"
#include "bf16_parity.h"

namespace {

using namespace nf::test;
using nf::cuda::Act;
using nf::ops::bf16;

constexpr double kBf16Fwd = 1e-2;
constexpr double kBf16Bwd = 3e-2;

NF_TEST(cuda_bf16_convert) {
  for (int64_t n : {1, 7, 4099}) {
    Vec x = randn(size_t(n), 3.0);
    x[0] = 1.0 + 1.0 / 256;  // a tie: rounds to even (1.0)
    DeviceF d_x(x), d_back{size_t(n)};
    DeviceB d_b{size_t(n)};
    NF_ASSERT_OK(nf::cuda::convert(d_b.get(), d_x.get(), n));
    const std::vector<bf16> got = d_b.download();
    bool same = true;
    for (int64_t i = 0; i < n; ++i) same = same && got[size_t(i)].bits == to_bf16(x[size_t(i)]).bits;
    NF_EXPECT(same, "float → bf16 rounds to nearest even, n=" + std::to_string(n));
    NF_EXPECT(value(got[0]) == 1.0, "ties go to even");
    NF_ASSERT_OK(nf::cuda::convert(d_back.get(), d_b.get(), n));
    const std::vector<float> back = d_back.download();
    bool exact = true;
    for (int64_t i = 0; i < n; ++i) exact = exact && double(back[size_t(i)]) == value(got[size_t(i)]);
    NF_EXPECT(exact, "bf16 → float is exact, n=" + std::to_string(n));
  }
}

NF_TEST(cuda_bf16_layernorm_parity) {
  struct Case {
    int64_t rows, D;
    bool residual, dadd, odd_params = false;
  };
  // Widths for each backward instantiation: 16-byte vectors (D a multiple of 8) with 1, 2, 3, 4
  // chunks a lane (D up to 256, 512, 768, 1,024) and a block per row (2,000); single columns at 20
  // and, a block per row, 1,030; γ and β one float past an aligned address (odd_params: the rows
  // could take vectors, the parameters cannot, so single columns run).
  const Case cases[] = {{1, 24, false, false}, {7, 40, true, false},   {65, 20, false, true}, {197 * 2, 40, true, true},
                        {50, 384, false, true}, {100, 768, true, true}, {33, 1024, false, false},
                        {20, 2000, false, true}, {17, 1030, true, false}, {30, 768, true, true, true}};
  for (const Case& c : cases) {
    const std::string name = dims({{"rows", c.rows}, {"D", c.D}, {"residual", c.residual}, {"dadd", c.dadd},
                                   {"odd_params", c.odd_params}});
    const size_t n = size_t(c.rows * c.D);
    const Vec x = randb(n, 2.0), res = c.residual ? randb(n) : Vec(), gamma = randn(size_t(c.D)),
              beta = randn(size_t(c.D)), dout = randb(n), dadd = c.dadd ? randb(n) : Vec();
    Vec out(n), sum(c.residual ? n : 0), mean(size_t(c.rows)), rstd(size_t(c.rows));
    nf::ops::LayerNormForward<double> rf;
    rf.rows = c.rows, rf.D = c.D, rf.out = out.data(), rf.sum = c.residual ? sum.data() : nullptr;
    rf.mean = mean.data(), rf.rstd = rstd.data(), rf.x = x.data(), rf.residual = c.residual ? res.data() : nullptr;
    rf.gamma = gamma.data(), rf.beta = beta.data();
    nf::ref::run(rf);
    if (c.residual)  // the kernel normalises the sum as stored (bf16): the reference takes the same
      for (double& v : sum) v = value(to_bf16(v));
    if (c.residual) {
      rf.x = sum.data(), rf.residual = nullptr, rf.sum = nullptr;
      nf::ref::run(rf);
    }
    Vec dx(n), dgamma(size_t(c.D), 0.5), dbeta(size_t(c.D), -0.25);
    nf::ops::LayerNormBackward<double> rb;
    rb.rows = c.rows, rb.D = c.D, rb.dx = dx.data(), rb.dgamma = dgamma.data(), rb.dbeta = dbeta.data();
    rb.dout = dout.data(), rb.dadd = c.dadd ? dadd.data() : nullptr, rb.x = c.residual ? sum.data() : x.data();
    rb.mean = mean.data(), rb.rstd = rstd.data(), rb.gamma = gamma.data();
    nf::ref::run(rb);

    DeviceB d_x(bits(x)), d_res(bits(res)), d_out(n), d_sum(sum.size()), d_dout(bits(dout)), d_dadd(bits(dadd)),
        d_dx(n);
    const auto padded = [&](const Vec& v) {  // v after one float when odd_params
      std::vector<float> out(c.odd_params ? 1 : 0, 0.0f);
      for (double e : v) out.push_back(float(e));
      return out;
    };
    DeviceF d_gamma_store(padded(gamma)), d_beta_store(padded(beta)), d_mean(size_t(c.rows)), d_rstd(size_t(c.rows)),
        d_dgamma(std::vector<float>(size_t(c.D), 0.5f)), d_dbeta(std::vector<float>(size_t(c.D), -0.25f));
    float* d_gamma = d_gamma_store.get() + (c.odd_params ? 1 : 0);
    float* d_beta = d_beta_store.get() + (c.odd_params ? 1 : 0);
    nf::ops::LayerNormForward<bf16> f;
    f.rows = c.rows, f.D = c.D, f.out = d_out, f.sum = c.residual ? d_sum.get() : nullptr, f.mean = d_mean;
    f.rstd = d_rstd, f.x = d_x, f.residual = c.residual ? d_res.get() : nullptr, f.gamma = d_gamma, f.beta = d_beta;
    NF_ASSERT_OK(nf::cuda::run(f));
    check_close("bf16 layernorm out", name, floats(d_out), out, kBf16Fwd);
    check_close("bf16 layernorm mean", name, d_mean.download(), mean, kBf16Fwd);
    check_close("bf16 layernorm rstd", name, d_rstd.download(), rstd, kBf16Fwd);
    if (c.residual) check_close("bf16 layernorm sum", name, floats(d_sum), sum, kBf16Fwd);
    nf::ops::LayerNormBackward<bf16> b;
    b.rows = c.rows, b.D = c.D, b.dx = c.dadd ? d_dadd.get() : d_dx.get(), b.dgamma = d_dgamma, b.dbeta = d_dbeta;
    b.dout = d_dout, b.dadd = c.dadd ? d_dadd.get() : nullptr, b.x = c.residual ? d_sum.get() : d_x.get();
    b.mean = d_mean, b.rstd = d_rstd, b.gamma = d_gamma;
    NF_ASSERT_OK(nf::cuda::run(b));
    check_close("bf16 layernorm dx", name, floats(c.dadd ? d_dadd : d_dx), dx, kBf16Bwd);
    check_close("bf16 layernorm dgamma", name, d_dgamma.download(), dgamma, kBf16Bwd);
    check_close("bf16 layernorm dbeta", name, d_dbeta.download(), dbeta, kBf16Bwd);
  }
}

NF_TEST(cuda_bf16_linear_parity) {
  struct Case {
    int64_t rows, in, out;
    bool bias;
  };
  const Case cases[] = {{1, 24, 10, true}, {65, 40, 20, true}, {197, 20, 72, true}, {7, 33, 5, false}};
  for (const Case& c : cases) {
    const std::string name = dims({{"rows", c.rows}, {"in", c.in}, {"out", c.out}, {"bias", c.bias}});
    const size_t nx = size_t(c.rows * c.in), ny = size_t(c.rows * c.out), nw = size_t(c.in * c.out);
    const Vec x = randb(nx), W = randb(nw, 0.2), b = randn(size_t(c.out)), dy = randb(ny);
    const nf::ops::LinearDims d{c.rows, c.in, c.out};
    const auto forward = [&](auto* y, const auto* xp, const auto* Wp, const auto* bp) {
      nf::ops::LinearForward<std::remove_pointer_t<decltype(y)>> f;
      f.d = d, f.y = y, f.x = xp, f.W = Wp, f.b = c.bias ? bp : nullptr;
      return f;
    };
    const auto backward = [&](auto* dx, auto* dW, auto* db, const auto* dyp, const auto* xp, const auto* Wp) {
      nf::ops::LinearBackward<std::remove_pointer_t<decltype(dx)>> g;
      g.d = d, g.dx = dx, g.dW = dW, g.db = c.bias ? db : nullptr, g.dy = dyp, g.x = xp, g.W = Wp;
      return g;
    };
    Vec y(ny), dx(nx), dW(nw, 0.5), db(size_t(c.out), -0.5);
    nf::ref::run(forward(y.data(), x.data(), W.data(), b.data()));
    nf::ref::run(backward(dx.data(), dW.data(), db.data(), dy.data(), x.data(), W.data()));
    DeviceB d_x(bits(x)), d_W(bits(W)), d_y(ny), d_dy(bits(dy)), d_dx(nx);
    DeviceF d_b(b), d_dW(std::vector<float>(nw, 0.5f)), d_db(std::vector<float>(size_t(c.out), -0.5f));
    const nf::cuda::GemmBackendInfo before = nf::cuda::gemm_backend_info();
    NF_ASSERT_OK(nf::cuda::run(forward(d_y.get(), d_x.get(), d_W.get(), d_b.get())));
    const nf::cuda::GemmBackendInfo after = nf::cuda::gemm_backend_info();
    check_close("bf16 linear y", name, floats(d_y), y, kBf16Fwd);
    // The bias rides in cuBLASLt's BIAS epilogue, as a bf16 vector (cublasLt.h gives it D's type; an
    // fp32 bias gets no algorithm, and each product then took a second pass over y): asserted with the
    // stand-in, which refuses an fp32 bias as the library does; printed on a GPU.
    if (c.bias && after.cublaslt.loaded) {
      const long long fused = after.cublaslt.fused - before.cublaslt.fused;
      if (after.cublaslt.stand_in) NF_EXPECT(fused == 1 && after.kernel == before.kernel, name + ": bias not fused");
      else std::printf("    %s: cuBLASLt products with a fused epilogue: %lld of 1\n", name.c_str(), fused);
    }
    // bRounded, the bias's bf16 copy that the layers pass: the same bits of y; and where cuBLASLt runs,
    // its epilogue reads that copy (given zeros instead, y is the product without the bias).
    if (c.bias) {
      DeviceB d_rounded(bits(b)), d_zeros(std::vector<bf16>(size_t(c.out))), d_y2(ny);
      auto f = forward(d_y2.get(), d_x.get(), d_W.get(), d_b.get());
      f.b_rounded = d_rounded.get();
      NF_ASSERT_OK(nf::cuda::run(f));
      NF_EXPECT(floats(d_y2) == floats(d_y), name + ": y with bRounded differs from y without it");
      if (after.cublaslt.loaded) {
        auto unbiased = forward(d_y.get(), d_x.get(), d_W.get(), d_b.get());
        unbiased.b = nullptr;
        f.b_rounded = d_zeros.get();
        NF_ASSERT_OK(nf::cuda::run(f));
        NF_ASSERT_OK(nf::cuda::run(unbiased));
        NF_EXPECT(floats(d_y2) == floats(d_y), name + ": the epilogue did not read bRounded");
      }
    }
    NF_ASSERT_OK(nf::cuda::run(backward(d_dx.get(), d_dW.get(), d_db.get(), d_dy.get(), d_x.get(), d_W.get())));
    check_close("bf16 linear dx", name, floats(d_dx), dx, kBf16Bwd);
    check_close("bf16 linear dW", name, d_dW.download(), dW, kBf16Bwd);
    if (c.bias) check_close("bf16 linear db", name, d_db.download(), db, kBf16Bwd);
  }
}

NF_TEST(cuda_bf16_feedforward_parity) {
  struct Case {
    int64_t rows, D, F;
    Act act;
    float p;
    bool residual = false;  // y = fc2(...) + b2 + r (fc2's C, beta 1)
  };
  const Case cases[] = {{30, 48, 72, Act::gelu, 0.0f, true}, {65, 40, 96, Act::relu, 0.25f},
                        {7, 20, 24, Act::gelu_tanh, 0.1f}};
  for (const Case& c : cases) {
    const std::string name =
        dims({{"rows", c.rows}, {"D", c.D}, {"F", c.F}, {"act", int(c.act)}, {"residual", c.residual}});
    const size_t nx = size_t(c.rows * c.D), nh = size_t(c.rows * c.F), nw = size_t(c.D * c.F);
    const Vec x = randb(nx), W1 = randb(nw, 0.2), b1 = randn(size_t(c.F)), W2 = randb(nw, 0.2), b2 = randn(size_t(c.D)),
              dy = randb(nx), r = c.residual ? randb(nx) : Vec(1);
    const nf::ops::FeedForwardDims d{c.rows, c.D, c.F, c.act, c.p, 42, 7};
    const auto forward = [&d, &c](auto* y, auto* h, auto* a, const auto* xp, const auto* w1, const auto* bb1,
                                  const auto* w2, const auto* bb2, const auto* rp) {
      nf::ops::FeedForwardForward<std::remove_pointer_t<decltype(y)>> f;
      f.d = d, f.y = y, f.h = h, f.a = a, f.x = xp, f.W1 = w1, f.b1 = bb1, f.W2 = w2, f.b2 = bb2;
      if (c.residual) f.residual = rp;
      return f;
    };
    const auto backward = [&d](auto* dx, auto* dW1, auto* db1, auto* dW2, auto* db2, const auto* dyp, const auto* xp,
                               const auto* h, const auto* a, const auto* w1, const auto* w2) {
      nf::ops::FeedForwardBackward<std::remove_pointer_t<decltype(dx)>> b;
      b.d = d, b.dx = dx, b.dW1 = dW1, b.db1 = db1, b.dW2 = dW2, b.db2 = db2, b.dy = dyp, b.x = xp, b.h = h, b.a = a;
      b.W1 = w1, b.W2 = w2;
      return b;
    };
    Vec y(nx), h(nh), a(nh), dx(nx), dW1(nw, 0.5), db1(size_t(c.F), 0.5), dW2(nw, -0.5), db2(size_t(c.D), -0.5);
    nf::ref::run(forward(y.data(), h.data(), a.data(), x.data(), W1.data(), b1.data(), W2.data(), b2.data(), r.data()));
    DeviceB d_r(bits(r)), d_x(bits(x)), d_W1(bits(W1)), d_W2(bits(W2)), d_dy(bits(dy)), d_y(nx), d_h(nh), d_a(nh), d_dx(nx);
    DeviceF d_b1(b1), d_b2(b2), d_dW1(std::vector<float>(nw, 0.5f)), d_db1(std::vector<float>(size_t(c.F), 0.5f)),
        d_dW2(std::vector<float>(nw, -0.5f)), d_db2(std::vector<float>(size_t(c.D), -0.5f));
    NF_ASSERT_OK(nf::cuda::run(forward(d_y.get(), d_h.get(), d_a.get(), d_x.get(), d_W1.get(), d_b1.get(), d_W2.get(),
                                       d_b2.get(), d_r.get())));
    check_close("bf16 feedforward y", name, floats(d_y), y, kBf16Fwd);
    check_close("bf16 feedforward h", name, floats(d_h), h, kBf16Fwd);
    check_close("bf16 feedforward a", name, floats(d_a), a, kBf16Fwd);
    // The reference backward at the device's saved h and a, as the device's backward takes them: ReLU's
    // derivative jumps at 0, so an h within bf16 rounding of 0 may have the other sign on the device,
    // and each such element changes dh by all of its gradient (a few of them put dx 3-6% off).
    const std::vector<float> h_dev = floats(d_h), a_dev = floats(d_a);
    const Vec h_saved(h_dev.begin(), h_dev.end()), a_saved(a_dev.begin(), a_dev.end());
    nf::ref::run(backward(dx.data(), dW1.data(), db1.data(), dW2.data(), db2.data(), dy.data(), x.data(),
                          h_saved.data(), a_saved.data(), W1.data(), W2.data()));
    NF_ASSERT_OK(nf::cuda::run(backward(d_dx.get(), d_dW1.get(), d_db1.get(), d_dW2.get(), d_db2.get(), d_dy.get(),
                                        d_x.get(), d_h.get(), d_a.get(), d_W1.get(), d_W2.get())));
    check_close("bf16 feedforward dx", name, floats(d_dx), dx, kBf16Bwd);
    check_close("bf16 feedforward dW1", name, d_dW1.download(), dW1, kBf16Bwd);
    check_close("bf16 feedforward db1", name, d_db1.download(), db1, kBf16Bwd);
    check_close("bf16 feedforward dW2", name, d_dW2.download(), dW2, kBf16Bwd);
    check_close("bf16 feedforward db2", name, d_db2.download(), db2, kBf16Bwd);
  }
}

NF_TEST(cuda_bf16_elementwise_parity) {
  for (int64_t n : {1, 7, 1000, 4099}) {
    const std::string name = dims({{"n", n}});
    const Vec a = randb(size_t(n)), b = randb(size_t(n));
    Vec sum(a.size()), dropped(a.size());
    nf::ref::add(sum.data(), a.data(), b.data(), n);
    nf::ref::dropout(dropped.data(), b.data(), n, 0.25f, 1234567, 89);
    DeviceB d_a(bits(a)), d_b(bits(b)), d_out(a.size());
    nf::ops::Accumulate<bf16> acc;
    acc.n = n, acc.y = d_a, acc.x = d_b;
    NF_ASSERT_OK(nf::cuda::run(acc));
    check_close("bf16 accumulate", name, floats(d_a), sum, kBf16Fwd);
    nf::ops::DropoutForward<bf16> drop;
    drop.d = {n, 0.25f, 1234567, 89}, drop.out = d_out, drop.x = d_b;
    NF_ASSERT_OK(nf::cuda::run(drop));
    check_close("bf16 dropout", name, floats(d_out), dropped, kBf16Fwd);
  }
  // copyRows: the CLS rows of [B, T, D] tokens out to [B, D] (exact: a copy).
  const int64_t B = 3, T = 10, D = 24;
  const Vec tokens = randb(size_t(B * T * D));
  Vec cls(size_t(B * D));
  for (int64_t bb = 0; bb < B; ++bb)
    for (int64_t i = 0; i < D; ++i) cls[size_t(bb * D + i)] = tokens[size_t(bb * T * D + i)];
  DeviceB d_tokens(bits(tokens)), d_cls(cls.size());
  nf::ops::CopyRows<bf16> cp;
  cp.rows = B, cp.cols = D, cp.dst = d_cls, cp.dst_stride = D, cp.src = d_tokens, cp.src_stride = T * D;
  NF_ASSERT_OK(nf::cuda::run(cp));
  check_close("bf16 copy_rows", "B=3 T=10 D=24", floats(d_cls), cls, 1e-12);
  // The channel scale (LayerScale): y = x · gamma; dgamma += Σ_rows dy · x, dx = dy · gamma.
  const int64_t rows = 65, cols = 40;
  const size_t nx = size_t(rows * cols);
  const Vec x = randb(nx), dy = randb(nx), gamma = randn(size_t(cols));
  Vec y(nx), dx(nx), dgamma(size_t(cols), 0.5);
  const auto forward = [&](auto* yp, const auto* xp, const auto* g) {
    nf::ops::ChannelScaleForward<std::remove_pointer_t<decltype(yp)>> f;
    f.rows = rows, f.cols = cols, f.y = yp, f.x = xp, f.gamma = g;
    return f;
  };
  const auto backward = [&](auto* dxp, auto* dg, const auto* dyp, const auto* xp, const auto* g) {
    nf::ops::ChannelScaleBackward<std::remove_pointer_t<decltype(dxp)>> b;
    b.rows = rows, b.cols = cols, b.dx = dxp, b.dgamma = dg, b.dy = dyp, b.x = xp, b.gamma = g;
    return b;
  };
  nf::ref::run(forward(y.data(), x.data(), gamma.data()));
  nf::ref::run(backward(dx.data(), dgamma.data(), dy.data(), x.data(), gamma.data()));
  DeviceB d_x(bits(x)), d_y(nx), d_dy(bits(dy)), d_dx(nx);
  DeviceF d_gamma(gamma), d_dgamma(std::vector<float>(size_t(cols), 0.5f));
  NF_ASSERT_OK(nf::cuda::run(forward(d_y.get(), d_x.get(), d_gamma.get())));
  check_close("bf16 channel_scale y", "rows=65 cols=40", floats(d_y), y, kBf16Fwd);
  NF_ASSERT_OK(nf::cuda::run(backward(d_dx.get(), d_dgamma.get(), static_cast<const bf16*>(d_dy.get()),
                                      static_cast<const bf16*>(d_x.get()), d_gamma.get())));
  check_close("bf16 channel_scale dx", "rows=65 cols=40", floats(d_dx), dx, kBf16Bwd);
  check_close("bf16 channel_scale dgamma", "rows=65 cols=40", d_dgamma.download(), dgamma, kBf16Bwd);
}

NF_TEST(cuda_bf16_cross_entropy_parity) {
  struct Case {
    int64_t N, V;
    double eps;
  };
  const Case cases[] = {{1, 10, 0.0}, {7, 100, 0.1}, {65, 1000, 0.0}};
  for (const Case& c : cases) {
    const std::string name = dims({{"N", c.N}, {"V", c.V}});
    const Vec x = randb(size_t(c.N * c.V), 2.0);
    std::vector<int32_t> t(size_t(c.N));
    for (int64_t i = 0; i < c.N; ++i) t[size_t(i)] = int32_t((i * 37) % c.V);
    t[0] = -100;  // ignored
    const nf::ops::CrossEntropyDims d{c.N, c.V, c.eps, -100, 1.0};
    Vec loss(1), dl(x.size());
    nf::ops::CrossEntropy<double> r;
    r.d = d, r.loss = loss.data(), r.dlogits = dl.data(), r.logits = x.data(), r.targets = t.data();
    nf::ref::run(r);
    DeviceB d_x(bits(x)), d_dl(x.size());
    DeviceF d_loss(1);
    Device<int32_t> d_t(t);
    nf::ops::CrossEntropy<bf16> k;
    k.d = d, k.loss = d_loss, k.dlogits = d_dl, k.logits = d_x, k.targets = d_t;
    NF_ASSERT_OK(nf::cuda::run(k));
    if (c.N > 1) check_close("bf16 cross_entropy loss", name, d_loss.download(), loss, kBf16Fwd);
    check_close("bf16 cross_entropy dlogits", name, floats(d_dl), dl, kBf16Bwd);
  }
}

NF_TEST(cuda_bf16_patch_embed_parity) {
  struct Case {
    int64_t B, C, H, W, P, D;
  };
  const Case cases[] = {{2, 3, 8, 8, 4, 20}, {1, 1, 12, 8, 4, 40}, {3, 3, 14, 14, 7, 24}};
  for (const Case& c : cases) {
    const std::string name = dims({{"B", c.B}, {"C", c.C}, {"H", c.H}, {"P", c.P}, {"D", c.D}});
    const nf::ops::PatchEmbedDims d{c.B, c.C, c.H, c.W, c.P, c.D};
    const int64_t N = (c.H / c.P) * (c.W / c.P), K = c.C * c.P * c.P;
    const size_t ni = size_t(c.B * c.C * c.H * c.W), nw = size_t(c.D * K), no = size_t(c.B * N * c.D);
    // The images are float32 (the caller's pixels); the patch matrix the product reads is their bf16
    // rounding, so the reference takes the rounded images (its dimages is the same either way).
    const Vec images = randb(ni), weight = randb(nw, 0.2), bias = randn(size_t(c.D)), dout = randb(no);
    const auto forward = [&d](auto* out, const auto* im, const auto* w, const auto* b) {
      nf::ops::PatchEmbedForward<std::remove_pointer_t<decltype(out)>> f;
      f.d = d, f.out = out, f.images = im, f.weight = w, f.bias = b;
      return f;
    };
    const auto backward = [&d](auto* dimages, auto* dweight, auto* dbias, const auto* dout_p, const auto* im,
                               const auto* w) {
      nf::ops::PatchEmbedBackward<std::remove_cv_t<std::remove_pointer_t<decltype(dout_p)>>> b;
      b.d = d, b.dimages = dimages, b.dweight = dweight, b.dbias = dbias, b.dout = dout_p, b.images = im, b.weight = w;
      return b;
    };
    Vec out(no), dimages(ni), dweight(nw, 0.5), dbias(size_t(c.D), -0.5);
    nf::ref::run(forward(out.data(), images.data(), weight.data(), bias.data()));
    nf::ref::run(backward(dimages.data(), dweight.data(), dbias.data(), dout.data(), images.data(), weight.data()));
    DeviceF d_images(images), d_bias(bias), d_dimages(ni), d_dweight(std::vector<float>(nw, 0.5f)),
        d_dbias(std::vector<float>(size_t(c.D), -0.5f));
    DeviceB d_weight(bits(weight)), d_out(no), d_dout(bits(dout));
    NF_ASSERT_OK(nf::cuda::run(forward(d_out.get(), d_images.get(), d_weight.get(), d_bias.get())));
    check_close("bf16 patch_embed out", name, floats(d_out), out, kBf16Fwd);
    NF_ASSERT_OK(nf::cuda::run(backward(d_dimages.get(), d_dweight.get(), d_dbias.get(), static_cast<const bf16*>(d_dout.get()),
                                        d_images.get(), static_cast<const bf16*>(d_weight.get()))));
    check_close("bf16 patch_embed dimages", name, d_dimages.download(), dimages, kBf16Bwd);
    check_close("bf16 patch_embed dweight", name, d_dweight.download(), dweight, kBf16Bwd);
    check_close("bf16 patch_embed dbias", name, d_dbias.download(), dbias, kBf16Bwd);
  }
}

NF_TEST(cuda_bf16_cls_pos_parity) {
  struct Case {
    int64_t B, N, D;
  };
  const Case cases[] = {{1, 1, 24}, {3, 9, 40}, {2, 196, 20}};
  for (const Case& c : cases) {
    const std::string name = dims({{"B", c.B}, {"N", c.N}, {"D", c.D}});
    const size_t nt = size_t(c.B * (c.N + 1) * c.D), np = size_t(c.B * c.N * c.D), npos = size_t((c.N + 1) * c.D);
    const Vec cls = randn(size_t(c.D)), patches = randb(np), pos = randn(npos), dout = randb(nt);
    const nf::ops::TokenPosDims d{c.B, c.N, c.D};
    const auto forward = [&d](auto* out, const auto* cls_p, const auto* patches_p, const auto* pos_p) {
      nf::ops::ClsPosForward<std::remove_pointer_t<decltype(out)>> f;
      f.d = d, f.out = out, f.cls = cls_p, f.patches = patches_p, f.pos = pos_p;
      return f;
    };
    const auto backward = [&d](auto* dcls, auto* dpatches, auto* dpos, const auto* dout_p) {
      nf::ops::ClsPosBackward<std::remove_pointer_t<decltype(dpatches)>> b;
      b.d = d, b.dcls = dcls, b.dpatches = dpatches, b.dpos = dpos, b.dout = dout_p;
      return b;
    };
    Vec out(nt), dcls(size_t(c.D), 0.5), dpatches(np), dpos(npos, -0.25);
    nf::ref::run(forward(out.data(), cls.data(), patches.data(), pos.data()));
    nf::ref::run(backward(dcls.data(), dpatches.data(), dpos.data(), dout.data()));
    DeviceF d_cls(cls), d_pos(pos), d_dcls(std::vector<float>(size_t(c.D), 0.5f)), d_dpos(std::vector<float>(npos, -0.25f));
    DeviceB d_patches(bits(patches)), d_out(nt), d_dout(bits(dout)), d_dpatches(np);
    NF_ASSERT_OK(nf::cuda::run(forward(d_out.get(), d_cls.get(), d_patches.get(), d_pos.get())));
    check_close("bf16 cls_pos out", name, floats(d_out), out, kBf16Fwd);
    NF_ASSERT_OK(nf::cuda::run(backward(d_dcls.get(), d_dpatches.get(), d_dpos.get(), static_cast<const bf16*>(d_dout.get()))));
    check_close("bf16 cls_pos dcls", name, d_dcls.download(), dcls, kBf16Bwd);
    check_close("bf16 cls_pos dpatches", name, floats(d_dpatches), dpatches, kBf16Bwd);
    check_close("bf16 cls_pos dpos", name, d_dpos.download(), dpos, kBf16Bwd);
  }
}

}  // namespace
