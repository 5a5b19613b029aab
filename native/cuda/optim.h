// Optimizer steps on the GPU: torch.optim.AdamW's update of parameter tensors in place, one tensor or
// a list of them in a few launches (multi-tensor), with the arguments and semantics of
// native/ops/optim.h, on device pointers.
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

// The adamwStep op (native/ops/optim.h): adamw_step. (sgdStep, sumSquares, scale and the clips: sgd.h, grad_norm.h.)
Status run(const ops::AdamWStep<float>& p);
// The adamwMultiStep op: every tensor of the list in a few launches (tables of up to 36 tensors and
// 320 chunks of kAdamWChunk elements each); the copy float32 (an exact copy) or bf16 (precision 'bf16').
Status run(const ops::AdamWMultiStep<float>& p);
Status run(const ops::AdamWMultiStep<ops::bf16>& p);

// Elements per block of the multi-tensor kernel.
constexpr int64_t kAdamWChunk = 65536;
// run's work with `chunk` elements per block (a positive multiple of 4): tests take small chunks to
// cross the launch tables' bounds with small tensors.
Status adamw_multi_step(const ops::AdamWMultiStep<float>& p, int64_t chunk = kAdamWChunk);
Status adamw_multi_step(const ops::AdamWMultiStep<ops::bf16>& p, int64_t chunk = kAdamWChunk);

}  // namespace nf::cuda
