// Optimizer steps on flat float buffers (torch.optim.AdamW and torch.optim.SGD, one parameter
// tensor's worth per call) and the reductions gradient clipping is built from.
#pragma once
#include <cstdint>

#include "kernel_decl.h"

namespace nf::cpu {

// torch.optim.AdamW's hyperparameters (same defaults); step is the 1-based step number t.
struct AdamWParams {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
  int64_t step = 1;
};

// One AdamW step in torch's order of operations, in place on n elements:
//   param *= 1 − lr·wd;  exp_avg = lerp(exp_avg, grad, 1 − β1);  exp_avg_sq = β2 exp_avg_sq + (1 − β2) grad²;
//   param −= lr / (1 − β1^t) · exp_avg / (sqrt(exp_avg_sq) / sqrt(1 − β2^t) + eps).
// The moment buffers start at zero before step 1.
Status adamw_step(float* param, float* exp_avg, float* exp_avg_sq, const float* grad, int64_t n,
                  const AdamWParams& p);

// torch.optim.SGD's hyperparameters; step is the 1-based step number (step 1 initialises the
// momentum buffer to the gradient, as torch does when the buffer does not exist yet).
struct SgdParams {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  int64_t step = 1;
};

// One SGD step in place on n elements: d = grad + wd·param; with momentum,
//   buf = d (step 1) or momentum·buf + (1 − dampening)·d, and d = d + momentum·buf (nesterov) or buf;
//   param −= lr·d. momentum_buf may be null when momentum is 0.
Status sgd_step(float* param, float* momentum_buf, const float* grad, int64_t n, const SgdParams& p);

// out[0] = Σ x² (accumulated in double).
Status sum_squares(float* out, const float* x, int64_t n);
// x *= s.
Status scale(float* x, int64_t n, float s);
// torch.nn.utils.clip_grad_norm_ on one buffer: total = sqrt(Σ g²), coef = max_norm / (total + 1e-6),
// g *= min(coef, 1) (NaN coef included, as torch's clamp); total_norm[0] = total.
Status clip_grad_norm(float* total_norm, float* grad, int64_t n, double max_norm);

NF_KERNEL_DECL(void adamw_step(float* param, float* exp_avg, float* exp_avg_sq, const float* grad, int64_t n,
                               const AdamWParams& p))
NF_KERNEL_DECL(void sgd_step(float* param, float* momentum_buf, const float* grad, int64_t n, const SgdParams& p))
NF_KERNEL_DECL(void sum_squares(double* out, const float* x, int64_t n))
NF_KERNEL_DECL(void scale(float* x, int64_t n, float s))

}  // namespace nf::cpu
