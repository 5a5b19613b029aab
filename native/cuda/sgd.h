// torch.optim.SGD on the GPU (momentum, dampening, weight decay, Nesterov): the CUDA twin of
// native/cpu/optim.h's sgd_step, in its own file beside optim.cu (AdamW).
#pragma once
#include <cstdint>

#include "../core/status.h"
#include "../ops/optim.h"

namespace nf::cuda {

using SgdParams = ops::SgdParams;

// One SGD step in place on n elements: d = grad + wd·param; with momentum,
//   buf = d (step 1) or momentum·buf + (1 − dampening)·d, and d = d + momentum·buf (nesterov) or buf;
//   param −= lr·d. momentum_buf may be null when momentum is 0.
Status sgd_step(float* param, float* momentum_buf, const float* grad, int64_t n, const SgdParams& p);

Status run(const ops::SgdStep<float>& p);

}  // namespace nf::cuda
