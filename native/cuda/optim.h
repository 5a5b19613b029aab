// Optimizer steps on the GPU: torch.optim.AdamW's update of one parameter tensor, in place, with the
// arguments and semantics of native/ops/optim.h, on device pointers.
#pragma once
#include <cstdint>

#include "../core/status.h"
#include "../ops/optim.h"

namespace nf::cuda {

// torch.optim.AdamW's hyperparameters (same defaults); step is the 1-based step number t.
using AdamWParams = ops::AdamWParams;

// param *= 1 − lr·wd; exp_avg = lerp(exp_avg, grad, 1 − β1); exp_avg_sq = β2 exp_avg_sq + (1 − β2) grad²;
// param −= lr / (1 − β1^t) · exp_avg / (sqrt(exp_avg_sq) / sqrt(1 − β2^t) + eps). n elements each.
Status adamw_step(float* param, float* exp_avg, float* exp_avg_sq, const float* grad, int64_t n,
                  const AdamWParams& p);

// The adamwStep op (native/ops/optim.h). (No sgdStep, sumSquares, scale or clipGradNorm kernels yet.)
Status run(const ops::AdamWStep<float>& p);

}  // namespace nf::cuda
