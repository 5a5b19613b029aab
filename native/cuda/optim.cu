// AdamW on the GPU: one fused elementwise pass over a parameter tensor and its moment buffers.
// Math (torch.optim.AdamW, step t): p ← p (1 − lr·wd); m ← m + (1 − β1)(g − m);
//   v ← β2 v + (1 − β2) g²; p ← p − (lr / (1 − β1^t)) · m / (sqrt(v) / sqrt(1 − β2^t) + eps).
//   The step-dependent factors are computed in double at the top of the kernel, from t and lr given
//   as arguments or read from the step values (native/ops/step_values.h; a CUDA graph's replays).
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

// The step-dependent factors, from step t and lr (the arguments, or the step values the kernel reads
// when a pointer is given: what a CUDA graph replays with each step's), in double as the CPU does.
struct AdamWFactors {
  double lr, step, beta1, beta2, eps, weight_decay;
  const double *lr_from, *step_from;
};

__global__ void __launch_bounds__(kThreads)
    adamw_kernel(float* param, float* exp_avg, float* exp_avg_sq, const float* grad, int64_t n, AdamWFactors f) {
  const double lr = f.lr_from ? *f.lr_from : f.lr, t = f.step_from ? *f.step_from : f.step;
  const double bc1 = 1 - pow(f.beta1, t), bc2 = 1 - pow(f.beta2, t);
  const float decay = float(1 - lr * f.weight_decay), beta1 = float(f.beta1), beta2 = float(f.beta2);
  const float step_size = float(lr / bc1), inv_sqrt_bc2 = float(1 / sqrt(bc2)), eps = float(f.eps);
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
  const AdamWFactors f{p.lr, double(p.step), p.beta1, p.beta2, p.eps, p.weight_decay,
                       p.lr_at >= 0 ? p.values.table + p.lr_at : nullptr,
                       p.step_at >= 0 ? p.values.table + p.step_at : nullptr};
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  const int64_t blocks = ceil_div(n, kThreads) < kMaxBlocks ? ceil_div(n, kThreads) : kMaxBlocks;
  NF_CUDA_TRY(op, launch(adamw_kernel, dim3(unsigned(blocks)), dim3(kThreads), 0, s, param, exp_avg, exp_avg_sq, grad,
                         n, f));
  return Status::Ok();
}

Status run(const ops::AdamWStep<float>& p) { return adamw_step(p.param, p.exp_avg, p.exp_avg_sq, p.grad, p.n, p.h); }

}  // namespace nf::cuda
