// Parity of the CUDA softmax cross-entropy (label smoothing, ignore_index, grad_scale, all rows
// ignored, bad targets) and AdamW with float64 references written here from PyTorch's definitions
// (F.cross_entropy, torch.optim.AdamW); the CPU backend's twins (native/cpu/ref/loss.h, optim.h)
// compute the same and can replace them once they are on this branch.
#include <cmath>
#include <limits>

#include "../loss.h"
#include "../optim.h"
#include "parity.h"

namespace {

using namespace nf::test;

double ref_cross_entropy(Vec* dlogits, const Vec& x, const std::vector<int32_t>& t, int64_t N, int64_t V, double eps,
                         int32_t ignore, double grad_scale) {
  int64_t count = 0;
  for (int32_t v : t) count += v != ignore;
  double total = 0;
  for (int64_t r = 0; r < N; ++r) {
    const double* xr = x.data() + r * V;
    if (t[size_t(r)] == ignore) {
      for (int64_t c = 0; c < V; ++c) (*dlogits)[size_t(r * V + c)] = 0;
      continue;
    }
    double m = xr[0], s = 0, sx = 0;
    for (int64_t c = 1; c < V; ++c) m = std::max(m, xr[c]);
    for (int64_t c = 0; c < V; ++c) s += std::exp(xr[c] - m), sx += xr[c];
    const double lse = m + std::log(s);
    total += (1 - eps) * (lse - xr[t[size_t(r)]]) + eps * (lse - sx / double(V));
    for (int64_t c = 0; c < V; ++c)
      (*dlogits)[size_t(r * V + c)] =
          grad_scale / double(count) * (std::exp(xr[c] - lse) - eps / double(V) - (c == t[size_t(r)] ? 1 - eps : 0));
  }
  return count ? total / double(count) : std::numeric_limits<double>::quiet_NaN();
}

NF_TEST(cuda_cross_entropy_parity) {
  struct Case {
    int64_t N, V;
    double eps;
    double grad_scale;
    int ignore_every;  // every k-th target is ignore_index (0: none)
  };
  const Case cases[] = {{1, 1, 0.0, 1.0, 0}, {7, 10, 0.1, 1.0, 3}, {65, 1000, 0.0, 0.5, 0}, {197, 37, 0.2, 1.0, 5},
                        {4, 3000, 1.0, 1.0, 2}};
  for (const Case& c : cases) {
    const std::string name = dims({{"N", c.N}, {"V", c.V}, {"ignore_every", c.ignore_every}});
    const Vec x = randn(size_t(c.N * c.V), 3.0);
    std::vector<int32_t> t(size_t(c.N));
    for (int64_t r = 0; r < c.N; ++r)
      t[size_t(r)] = c.ignore_every && r % c.ignore_every == 1 ? -100 : int32_t((r * 7919) % c.V);
    Vec dl(x.size());
    const double loss = ref_cross_entropy(&dl, x, t, c.N, c.V, c.eps, -100, c.grad_scale);
    DeviceF d_x(x), d_dl(x.size()), d_loss(1);
    Device<int32_t> d_t(t);
    nf::cuda::CrossEntropyDims d{c.N, c.V, c.eps, -100, c.grad_scale};
    NF_ASSERT_OK(nf::cuda::cross_entropy(d_loss, d_dl, d_x, d_t, d));
    check_close("cross_entropy loss", name, d_loss.download(), Vec{loss}, kFwdTol);
    check_close("cross_entropy dlogits", name, d_dl.download(), dl, kBwdTol);
  }
}

NF_TEST(cuda_cross_entropy_edge_cases) {
  const int64_t N = 5, V = 4;
  DeviceF d_x(randn(size_t(N * V))), d_dl(size_t(N * V)), d_loss(1);
  Device<int32_t> all_ignored(std::vector<int32_t>(size_t(N), 7));
  NF_ASSERT_OK(nf::cuda::cross_entropy(d_loss, d_dl, d_x, all_ignored, {N, V, 0.0, 7, 1.0}));
  NF_EXPECT(std::isnan(d_loss.download()[0]), "every target ignored: NaN, as PyTorch");
  for (float g : d_dl.download()) NF_EXPECT(g == 0.0f);
  Device<int32_t> bad(std::vector<int32_t>{0, 1, 4, -1, 2});
  const nf::Status st = nf::cuda::cross_entropy(d_loss, nullptr, d_x, bad, {N, V, 0.0, -100, 1.0});
  NF_EXPECT(!st.ok() && st.op == "cross_entropy" && st.message.find("row 2") != std::string::npos, st.message);
  NF_EXPECT(!nf::cuda::cross_entropy(d_loss, nullptr, d_x, bad, {N, V, 1.5, -100, 1.0}).ok(), "label_smoothing");
}

NF_TEST(cuda_adamw_parity) {
  for (int64_t n : {1, 1000, 4099}) {
    const Vec p0 = randn(size_t(n)), g = randn(size_t(n)), m0 = randn(size_t(n), 0.1);
    Vec v0 = randn(size_t(n), 0.1);
    for (double& v : v0) v = v * v;
    nf::cuda::AdamWParams hp;
    hp.lr = 3e-3, hp.beta1 = 0.8, hp.beta2 = 0.99, hp.eps = 1e-6, hp.weight_decay = 0.05;
    DeviceF d_p(p0), d_m(m0), d_v(v0), d_g(g);
    Vec p = p0, m = m0, v = v0;
    for (int64_t step = 1; step <= 3; ++step) {  // the same gradient thrice
      hp.step = step;
      NF_ASSERT_OK(nf::cuda::adamw_step(d_p, d_m, d_v, d_g, n, hp));
      const double bc1 = 1 - std::pow(hp.beta1, double(step)), bc2 = 1 - std::pow(hp.beta2, double(step));
      for (size_t i = 0; i < size_t(n); ++i) {
        p[i] *= 1 - hp.lr * hp.weight_decay;
        m[i] += (1 - hp.beta1) * (g[i] - m[i]);
        v[i] = hp.beta2 * v[i] + (1 - hp.beta2) * g[i] * g[i];
        p[i] -= hp.lr / bc1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + hp.eps);
      }
    }
    const std::string name = dims({{"n", n}});
    check_close("adamw param", name, d_p.download(), p, kFwdTol);
    check_close("adamw exp_avg", name, d_m.download(), m, kFwdTol);
    check_close("adamw exp_avg_sq", name, d_v.download(), v, kFwdTol);
  }
  nf::cuda::AdamWParams bad;
  bad.step = 0;
  NF_EXPECT(!nf::cuda::adamw_step(nullptr, nullptr, nullptr, nullptr, 4, bad).ok());
}

}  // namespace
