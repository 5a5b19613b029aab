// AdamW on the GPU: one fused elementwise pass over a parameter tensor and its moment buffers.
// Math (torch.optim.AdamW, step t): p ← p (1 − lr·wd); m ← m + (1 − β1)(g − m);
//   v ← β2 v + (1 − β2) g²; p ← p − (lr / (1 − β1^t)) · m / (sqrt(v) / sqrt(1 − β2^t) + eps).
//   The step-dependent factors are computed once on the host, in double.
// Layout: param, exp_avg, exp_avg_sq, grad are flat [n] arrays.
// Dimension key: n = elements of the parameter tensor.
// Grid-stride loop; memory-bound (16 bytes read and 12 written per element).
#include "optim.h"

#include <cmath>

#include "common.cuh"

namespace nf::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;

__global__ void __launch_bounds__(kThreads)
    adamw_kernel(float* param, float* exp_avg, float* exp_avg_sq, const float* grad, int64_t n, float decay,
                 float beta1, float beta2, float step_size, float inv_sqrt_bc2, float eps) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float g = grad[i];
    const float m = fmaf(1.0f - beta1, g - exp_avg[i], exp_avg[i]);
    const float v = fmaf(beta2, exp_avg_sq[i], (1.0f - beta2) * g * g);
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    param[i] = param[i] * decay - step_size * m / (sqrtf(v) * inv_sqrt_bc2 + eps);
  }
}

}  // namespace

Status adamw_step(float* param, float* exp_avg, float* exp_avg_sq, const float* grad, int64_t n,
                  const AdamWParams& p) {
  const char* op = "adamw_step";
  NF_CHECK(n >= 0, op, "n must be non-negative");
  NF_CHECK(p.step >= 1, op, "step must be at least 1");
  NF_CHECK(p.lr >= 0 && p.eps >= 0 && p.weight_decay >= 0, op, "lr, eps and weight_decay must be non-negative");
  NF_CHECK(p.beta1 >= 0 && p.beta1 < 1 && p.beta2 >= 0 && p.beta2 < 1, op, "betas must be in [0, 1)");
  if (n == 0) return Status::Ok();
  const double bc1 = 1 - std::pow(p.beta1, double(p.step)), bc2 = 1 - std::pow(p.beta2, double(p.step));
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  const int64_t blocks = ceil_div(n, kThreads) < kMaxBlocks ? ceil_div(n, kThreads) : kMaxBlocks;
  NF_CUDA_TRY(op, launch(adamw_kernel, dim3(unsigned(blocks)), dim3(kThreads), 0, s, param, exp_avg, exp_avg_sq, grad,
                         n, float(1 - p.lr * p.weight_decay), float(p.beta1), float(p.beta2), float(p.lr / bc1),
                         float(1 / std::sqrt(bc2)), float(p.eps)));
  return Status::Ok();
}

Status run(const ops::AdamWStep<float>& p) { return adamw_step(p.param, p.exp_avg, p.exp_avg_sq, p.grad, p.n, p.h); }

}  // namespace nf::cuda
