// Optimizer steps on flat float buffers (torch.optim.AdamW and torch.optim.SGD, one parameter
// tensor's worth per call) and the reductions gradient clipping is built from.
#pragma once
#include <cstdint>

#include "../ops/optim.h"
#include "kernel_decl.h"

namespace nf::cpu {

using AdamWParams = ops::AdamWParams;
using SgdParams = ops::SgdParams;

// The ops (native/ops/optim.h): an AdamW step and an SGD step in place on n elements; out[0] = Σ x²
// (accumulated in double); x *= s; torch.nn.utils.clip_grad_norm_ on one buffer: total = sqrt(Σ g²),
// coef = max_norm / (total + 1e-6), g *= min(coef, 1) (NaN coef included, as torch's clamp);
// total_norm[0] = total.
Status run(const ops::AdamWStep<float>& p);
Status run(const ops::AdamWMultiStep<float>& p);  // adamw_multi_step over the list, float copies after it
// The same with the bf16 weight copies of precision 'bf16' written in the step's pass (copy[i], where
// given: param[i] rounded as castBf16 rounds), instead of a cast of each copy before the next forward.
Status run(const ops::AdamWMultiStep<ops::bf16>& p);
Status run(const ops::SgdStep<float>& p);
Status run(const ops::SumSquares<float>& p);
Status run(const ops::Scale<float>& p);
Status run(const ops::ClipGradNorm<float>& p);
Status run(const ops::ClipCoefficient<float>& p);
Status run(const ops::ClipScale<float>& p);

// AdamW steps on `count` tensors (entry e: sizes[e] values of param[e], exp_avg[e], exp_avg_sq[e], grad[e]),
// in one parallel_for over all of them; copy (null, or per entry null or bf16 bits): the new param rounded
// to bf16 (vstore_bf16_w, as castBf16 rounds), written in the same pass.
struct AdamWList {
  int64_t count;
  const int64_t* sizes;
  float* const* param;
  float* const* exp_avg;
  float* const* exp_avg_sq;
  const float* const* grad;
  uint16_t* const* copy;
};
NF_KERNEL_DECL(void adamw_multi_step(const AdamWList& list, const AdamWParams& p))
NF_KERNEL_DECL(void sgd_step(float* param, float* momentum_buf, const float* grad, int64_t n, const SgdParams& p))
NF_KERNEL_DECL(void sum_squares(double* out, const float* x, int64_t n))
NF_KERNEL_DECL(void scale(float* x, int64_t n, float s))

}  // namespace nf::cpu
