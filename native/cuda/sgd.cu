// SGD on the GPU: one fused elementwise pass over a parameter tensor (and its momentum buffer).
// Math (torch.optim.SGD, step t): d = g + wd·p; with momentum μ: b = d (t = 1) or μ b + (1 − τ) d,
//   d = d + μ b (Nesterov) or b; p ← p − lr·d. The same fused multiply-adds as the CPU kernel.
// Layout: param, momentum_buf, grad are flat [n] arrays.
// Dimension key: n = elements of the parameter tensor.
// Grid-stride loop; memory-bound (8–12 bytes read and 4–8 written per element).
#include "sgd.h"

#include "common.cuh"

namespace nf::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;

__global__ void __launch_bounds__(kThreads)
    sgd_kernel(float* param, float* momentum_buf, const float* grad, int64_t n, float wd, float momentum, float damp,
               float neg_lr, bool first, bool nesterov) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float x = param[i];
    float d = wd != 0.0f ? fmaf(x, wd, grad[i]) : grad[i];
    if (momentum_buf) {
      const float b = first ? d : fmaf(d, damp, momentum_buf[i] * momentum);
      momentum_buf[i] = b;
      d = nesterov ? fmaf(b, momentum, d) : b;
    }
    param[i] = fmaf(d, neg_lr, x);
  }
}

}  // namespace

Status sgd_step(float* param, float* momentum_buf, const float* grad, int64_t n, const SgdParams& p) {
  const char* op = "sgd_step";
  NF_TRY(ops::sgd_check(op, n, p, momentum_buf));
  if (n == 0) return Status::Ok();
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  NF_CUDA_TRY(op, launch(sgd_kernel, capped_grid(ceil_div(n, kThreads), kMaxBlocks), dim3(kThreads), 0, s, param,
                         p.momentum != 0 ? momentum_buf : nullptr, grad, n, float(p.weight_decay), float(p.momentum),
                         float(1 - p.dampening), float(-p.lr), p.step == 1, p.nesterov));
  return Status::Ok();
}

Status run(const ops::SgdStep<float>& p) { return sgd_step(p.param, p.momentum_buf, p.grad, p.n, p.h); }

}  // namespace nf::cuda
