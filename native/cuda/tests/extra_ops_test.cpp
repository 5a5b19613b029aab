// Parity of the CUDA ops added beside the layer ops (registered through the op schema like the layer ops): SGD (momentum, dampening,
// weight decay, Nesterov), the gradient-clipping reductions and the fused clip with native/cpu/ref/optim.h, the
// masked MSE with native/cpu/ref/loss.h, and incremental decoding (self-attention through the
// key/value cache step by step, cross-attention with key padding) with the float64 reference of the
// full attention layer (native/cpu/ref/attention.h): row t of a causal forward over the prefix.
#include <cmath>

#include "../../cpu/ref/attention.h"
#include "../../cpu/ref/loss.h"
#include "../../cpu/ref/optim.h"
#include "../attention_decode.h"
#include "../grad_norm.h"
#include "../mse.h"
#include "../sgd.h"
#include "parity.h"

namespace {

using namespace nf::test;

NF_TEST(cuda_sgd_parity) {
  struct Case {
    int64_t n;
    double momentum, dampening, wd;
    bool nesterov;
  };
  const Case cases[] = {{1, 0, 0, 0, false}, {1000, 0.9, 0, 0.01, false}, {4099, 0.9, 0, 0, true},
                        {777, 0.5, 0.3, 0.1, false}};
  for (const Case& c : cases) {
    const Vec p0 = randn(size_t(c.n)), g = randn(size_t(c.n));
    DeviceF d_p(p0), d_g(g), d_b(size_t(c.n));
    Vec p = p0, b(size_t(c.n));
    nf::cuda::SgdParams hp;
    hp.lr = 0.05, hp.momentum = c.momentum, hp.dampening = c.dampening, hp.weight_decay = c.wd, hp.nesterov = c.nesterov;
    for (int64_t step = 1; step <= 3; ++step) {
      hp.step = step;
      NF_ASSERT_OK(nf::cuda::sgd_step(d_p, d_b, d_g, c.n, hp));
      nf::ref::sgd_step(p.data(), b.data(), g.data(), c.n, hp.lr, hp.momentum, hp.dampening, hp.weight_decay,
                        hp.nesterov, step);
    }
    const std::string name = dims({{"n", c.n}, {"nesterov", c.nesterov}});
    check_close("sgd param", name, d_p.download(), p, kFwdTol);
    if (c.momentum != 0) check_close("sgd momentum_buf", name, d_b.download(), b, kFwdTol);
  }
  nf::cuda::SgdParams bad;
  bad.momentum = 0.9;
  NF_EXPECT(!nf::cuda::sgd_step(nullptr, nullptr, nullptr, 4, bad).ok(), "momentum without a buffer");
}

NF_TEST(cuda_grad_norm_parity) {
  for (int64_t n : {0, 1, 1000, 300000}) {
    const Vec x = randn(size_t(n));
    DeviceF d_x(x), d_out(1);
    NF_ASSERT_OK(nf::cuda::sum_squares(d_out, d_x, n));
    const std::string name = dims({{"n", n}});
    check_close("sum_squares", name, d_out.download(), Vec{nf::ref::sum_squares(x.data(), n)}, kFwdTol);
    NF_ASSERT_OK(nf::cuda::scale(d_x, n, 0.375f));
    Vec scaled = x;
    nf::ref::scale(scaled.data(), n, 0.375);
    check_close("scale", name, d_x.download(), scaled, kFwdTol);
  }
}

NF_TEST(cuda_clip_grad_norm_parity) {
  struct Case {
    int64_t n;
    double max_norm;  // < the norm: clipped; > it: untouched
  };
  const Case cases[] = {{0, 1.0}, {1, 0.25}, {50, 1.0}, {1000, 1e3}, {4099, 0.0}, {300000, 10.0}};
  for (const Case& c : cases) {
    const Vec g = randn(size_t(c.n));
    Vec ref = g;
    const double total = nf::ref::clip_grad_norm(ref.data(), c.n, c.max_norm);
    DeviceF d_g(g), d_total(std::vector<float>{-1.0f});
    nf::ops::ClipGradNorm<float> p;
    p.n = c.n, p.max_norm = c.max_norm, p.total_norm = d_total, p.grad = d_g;
    NF_ASSERT_OK(nf::cuda::run(p));
    const std::string name = dims({{"n", c.n}, {"max_norm_x1000", int64_t(c.max_norm * 1000)}});
    check_close("clip_grad_norm total", name, d_total.download(), Vec{total}, kFwdTol);
    check_close("clip_grad_norm grad", name, d_g.download(), ref, kFwdTol);
    if (c.max_norm >= 1e3) NF_EXPECT(d_g.download() == to_float(g), "below the threshold: untouched, bit for bit");
  }
  // A NaN gradient makes the norm NaN, and torch scales every gradient by it.
  Vec g = randn(40);
  g[7] = NAN;
  DeviceF d_g(g), d_total(1);
  nf::ops::ClipGradNorm<float> p;
  p.n = 40, p.max_norm = 1.0, p.total_norm = d_total, p.grad = d_g;
  NF_ASSERT_OK(nf::cuda::run(p));
  NF_EXPECT(std::isnan(d_total.download()[0]), "a NaN norm");
  for (float v : d_g.download()) NF_EXPECT(std::isnan(v), "every gradient NaN");
  p.max_norm = -1;
  NF_EXPECT(!nf::cuda::run(p).ok(), "a negative max_norm");
}

NF_TEST(cuda_mse_parity) {
  struct Case {
    int64_t rows, cols;
    int mask_every;  // row r selected when r % mask_every == 0 (0: no mask; -1: a mask selecting nothing)
    double grad_scale;
  };
  const Case cases[] = {{1, 1, 0, 1.0}, {48, 49, 3, 1.0}, {197, 7, 0, 0.5}, {2000, 300, 4, 1.0}, {5, 3, -1, 1.0}};
  for (const Case& c : cases) {
    const Vec pred = randn(size_t(c.rows * c.cols)), target = randn(size_t(c.rows * c.cols));
    std::vector<uint8_t> mask(size_t(c.rows));
    for (int64_t r = 0; r < c.rows; ++r) mask[size_t(r)] = c.mask_every > 0 && r % c.mask_every == 0;
    const uint8_t* m = c.mask_every != 0 ? mask.data() : nullptr;
    double loss = 0;
    Vec dpred(pred.size());
    nf::ref::mse(&loss, dpred.data(), pred.data(), target.data(), m, c.rows, c.cols, c.grad_scale);
    DeviceF d_p(pred), d_t(target), d_d(pred.size()), d_loss(1);
    Device<uint8_t> d_m(mask);
    NF_ASSERT_OK(nf::cuda::mse(d_loss, d_d, d_p, d_t, m ? d_m.get() : nullptr, {c.rows, c.cols, c.grad_scale}));
    const std::string name = dims({{"rows", c.rows}, {"cols", c.cols}, {"mask_every", c.mask_every}});
    if (c.mask_every < 0) {
      NF_EXPECT(std::isnan(d_loss.download()[0]), "no row selected: NaN");
      for (float g : d_d.download()) NF_EXPECT(g == 0.0f);
      continue;
    }
    check_close("mse loss", name, d_loss.download(), Vec{loss}, kFwdTol);
    check_close("mse dpred", name, d_d.download(), dpred, kBwdTol);
  }
  NF_EXPECT(!nf::cuda::mse(nullptr, nullptr, nullptr, nullptr, nullptr, {3, 0, 1.0}).ok(), "cols 0");
}

NF_TEST(cuda_attention_decode_parity) {
  struct Case {
    int64_t B, T, D, H;
  };
  for (const Case& c : {Case{1, 1, 8, 2}, Case{3, 7, 48, 2}, Case{2, 5, 40, 1}, Case{2, 9, 64, 4}}) {
    const int64_t B = c.B, T = c.T, D = c.D;
    const Vec x = randn(size_t(B * T * D)), memory = randn(size_t(B * (T + 2) * D));
    const Vec qkv_weight = randn(size_t(3 * D * D), 1.0 / std::sqrt(double(D))), qkv_bias = randn(size_t(3 * D), 0.1);
    const Vec proj_weight = randn(size_t(D * D), 1.0 / std::sqrt(double(D))), proj_bias = randn(size_t(D), 0.1);
    DeviceF d_Wqkv(qkv_weight), d_bqkv(qkv_bias), d_Wproj(proj_weight), d_bproj(proj_bias);
    const std::string name = dims({{"B", B}, {"T", T}, {"D", D}, {"H", c.H}});
    // Self-attention: the reference is a causal forward over the whole sequence; the decode steps
    // see one position at a time and must give each row.
    Vec out(size_t(B * T * D)), qkv(size_t(B * T * 3 * D)), ctx(size_t(B * T * D)), lse(size_t(B * c.H * T));
    nf::ops::AttentionForward<double> s;
    s.d.B = B, s.d.Tq = s.d.Tk = T, s.d.D = D, s.d.H = c.H, s.m.causal = true;
    s.out = out.data(), s.qkv = qkv.data(), s.ctx = ctx.data(), s.lse = lse.data();
    s.x = x.data(), s.qkv_weight = qkv_weight.data(), s.qkv_bias = qkv_bias.data(), s.proj_weight = proj_weight.data(), s.proj_bias = proj_bias.data();
    nf::ref::run(s);
    const int64_t max_t = T + 1;
    DeviceF d_cache(size_t(B * max_t * 2 * D)), d_x(size_t(B * D)), d_out(size_t(B * D));
    std::vector<float> got(size_t(B * T * D));
    for (int64_t t = 0; t < T; ++t) {
      Vec xt(size_t(B * D));
      for (int64_t b = 0; b < B; ++b)
        for (int64_t i = 0; i < D; ++i) xt[size_t(b * D + i)] = x[size_t((b * T + t) * D + i)];
      d_x.upload(xt);
      nf::cuda::AttentionDecodeDims d;
      d.B = B, d.D = D, d.H = c.H, d.t = t, d.max_t = max_t;
      NF_ASSERT_OK(nf::cuda::attention_decode(d_out, d_cache, nullptr, d_x, nullptr, d_Wqkv, d_bqkv, d_Wproj, d_bproj, d));
      const std::vector<float> o = d_out.download();
      for (int64_t b = 0; b < B; ++b)
        for (int64_t i = 0; i < D; ++i) got[size_t((b * T + t) * D + i)] = o[size_t(b * D + i)];
    }
    check_close("attention_decode self", name, got, out, kFwdTol);
    // Cross-attention against memory [B, Tk, D] with key padding (one key of each sequence blocked).
    const int64_t Tk = T + 2;
    std::vector<uint8_t> kp(size_t(B * Tk));
    for (int64_t b = 0; b < B; ++b) kp[size_t(b * Tk + (b + 1) % Tk)] = 1;
    Vec x1(size_t(B * D)), cout(size_t(B * D)), q(size_t(B * D)), kv(size_t(B * Tk * 2 * D)), cctx(size_t(B * D)),
        clse(size_t(B * c.H));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < D; ++i) x1[size_t(b * D + i)] = x[size_t((b * T) * D + i)];
    nf::ops::AttentionForward<double> sc;
    sc.d.B = B, sc.d.Tq = 1, sc.d.Tk = Tk, sc.d.D = D, sc.d.H = c.H, sc.m.key_padding_mask = kp.data(), sc.memory = memory.data();
    sc.out = cout.data(), sc.q = q.data(), sc.kv = kv.data(), sc.ctx = cctx.data(), sc.lse = clse.data();
    sc.x = x1.data(), sc.qkv_weight = qkv_weight.data(), sc.qkv_bias = qkv_bias.data(), sc.proj_weight = proj_weight.data(), sc.proj_bias = proj_bias.data();
    nf::ref::run(sc);
    DeviceF d_kv(kv), d_x1(x1), d_cout(size_t(B * D));
    Device<uint8_t> d_kp(kp);
    nf::cuda::AttentionDecodeDims d;
    d.B = B, d.D = D, d.H = c.H, d.Tk = Tk;
    NF_ASSERT_OK(nf::cuda::attention_decode(d_cout, nullptr, d_kv, d_x1, d_kp, d_Wqkv, d_bqkv, d_Wproj, d_bproj, d));
    check_close("attention_decode cross", name, d_cout.download(), cout, kFwdTol);
  }
  nf::cuda::AttentionDecodeDims bad;
  bad.B = 1, bad.D = 4, bad.H = 1, bad.t = 2, bad.max_t = 2;
  float dummy = 0;
  NF_EXPECT(!nf::cuda::attention_decode(&dummy, &dummy, nullptr, &dummy, nullptr, &dummy, nullptr, &dummy, nullptr, bad).ok(),
            "t past the cache");
}

}  // namespace
