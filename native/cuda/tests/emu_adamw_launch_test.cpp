// The multi-tensor AdamW's launches, counted by the emulator (nf::emu::grids_run): a list of many
// tensors takes one launch per table of 36 tensors / 320 chunks, not one per tensor; one tensor one.
// And its results against the per-tensor kernel it replaced, whose per-element code the emulator
// runs as host code: that code, written out here, gives the same bits.
#include <memory>
#include <cmath>
#include <memory>
#include <vector>

#include "../optim.h"
#include "../runtime.h"
#include "parity.h"

namespace {

using namespace nf::test;

NF_TEST(emu_adamw_multi_launch_count) {
  // 152 tensors (ViT-B/16's parameter count) of 3 to 99 elements: ceil(152 / 36) = 5 launches.
  std::vector<int64_t> sizes;
  for (int k = 0; k < 152; ++k) sizes.push_back(3 + (k * 37) % 97);
  std::vector<std::vector<float>> host;
  std::vector<std::unique_ptr<DeviceF>> arrays;
  nf::ops::AdamWMultiStep<float> p;
  p.sizes = sizes;
  for (int64_t n : sizes) {
    std::vector<float*> four;
    for (int j = 0; j < 4; ++j) {
      arrays.push_back(std::make_unique<DeviceF>(to_float(randn(size_t(n), j == 3 ? 0.0 : 1.0))));
      four.push_back(arrays.back()->get());
    }
    p.param.push_back(four[0]);
    p.grad.push_back(four[1]);
    p.exp_avg.push_back(four[2]);
    p.exp_avg_sq.push_back(four[3]);
    p.copy.push_back(nullptr);
  }
  int64_t before = nf::emu::grids_run();
  NF_ASSERT_OK(nf::cuda::run(p));
  NF_EXPECT(nf::emu::grids_run() - before == 5, "launches: " + std::to_string(nf::emu::grids_run() - before));
  // Chunks of 4 elements: 152 tensors of 1 to 25 chunks (2,000 and more blocks) take ceil(blocks / 320).
  int64_t blocks = 0;
  for (int64_t n : sizes) blocks += (n + 3) / 4;
  before = nf::emu::grids_run();
  NF_ASSERT_OK(nf::cuda::adamw_multi_step(p, 4));
  const int64_t launches = nf::emu::grids_run() - before;
  NF_EXPECT(launches >= (blocks + 319) / 320 && launches <= (blocks + 319) / 320 + 5,
            "launches: " + std::to_string(launches) + " for " + std::to_string(blocks) + " blocks");
  // One tensor: one launch.
  before = nf::emu::grids_run();
  NF_ASSERT_OK(nf::cuda::adamw_step(p.param[0], p.exp_avg[0], p.exp_avg_sq[0], p.grad[0], sizes[0], p.h));
  NF_EXPECT(nf::emu::grids_run() - before == 1);
}

// The per-tensor adamw_kernel before the multi-tensor one, element by element (its factors in double,
// its float expression unchanged).
void old_adamw(float* param, float* exp_avg, float* exp_avg_sq, const float* grad, int64_t n,
               const nf::ops::AdamWParams& f) {
  const double lr = f.lr, t = double(f.step);
  const double bc1 = 1 - pow(f.beta1, t), bc2 = 1 - pow(f.beta2, t);
  const float decay = float(1 - lr * f.weight_decay), beta1 = float(f.beta1), beta2 = float(f.beta2);
  const float step_size = float(lr / bc1), inv_sqrt_bc2 = float(1 / sqrt(bc2)), eps = float(f.eps);
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i];
    const float m = fmaf(1.0f - beta1, g - exp_avg[i], exp_avg[i]);
    const float v = fmaf(beta2, exp_avg_sq[i], (1.0f - beta2) * g * g);
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    param[i] = param[i] * decay - step_size * m / (sqrtf(v) * inv_sqrt_bc2 + eps);
  }
}

NF_TEST(emu_adamw_multi_matches_the_per_tensor_kernel_bits) {
  for (int64_t n : {1, 7, 4097, 70001}) {
    std::vector<float> p = to_float(randn(size_t(n))), g = to_float(randn(size_t(n))), m = to_float(randn(size_t(n), 0.1));
    std::vector<float> v(static_cast<size_t>(n));
    for (float& e : v) e = float(std::fabs(randn(1, 0.1)[0]));
    nf::ops::AdamWParams h;
    h.lr = 3e-3, h.beta1 = 0.8, h.beta2 = 0.99, h.eps = 1e-6, h.weight_decay = 0.05;
    DeviceF dp(p), dg(g), dm(m), dv(v);
    for (int64_t step = 1; step <= 3; ++step) {
      h.step = step;
      old_adamw(p.data(), m.data(), v.data(), g.data(), n, h);
      NF_ASSERT_OK(nf::cuda::adamw_step(dp, dm, dv, dg, n, h));
    }
    NF_EXPECT(dp.download() == p && dm.download() == m && dv.download() == v, "n = " + std::to_string(n));
  }
}

}  // namespace
