// LayerNorm over the last dimension on the GPU, forward and backward, plus the fused residual-add
// variant: the same entry points, arguments and semantics as native/cpu/layernorm.h, on device
// pointers, queued on the backend's stream.
#pragma once
#include <cstdint>

#include "../core/status.h"
#include "../cpu/layernorm.h"  // the dims structs, shared with the CPU kernels

namespace nf::cuda {

using LayerNormDims = cpu::LayerNormDims;

// out = (x - mean) * rstd * gamma + beta; saves mean[rows], rstd[rows]. With `residual` non-null,
// first forms sum = x + residual (written to `sum`, which backward then takes as x).
Status layernorm_forward(float* out, float* sum, float* mean, float* rstd, const float* x,
                         const float* residual, const float* gamma, const float* beta, LayerNormDims d);

// dx = LN'(x)^T dout (+ dadd when given); dgamma += sum(dout * xhat); dbeta += sum(dout).
// dx may alias dadd.
Status layernorm_backward(float* dx, float* dgamma, float* dbeta, const float* dout, const float* dadd,
                          const float* x, const float* mean, const float* rstd, const float* gamma,
                          LayerNormDims d);

}  // namespace nf::cuda
