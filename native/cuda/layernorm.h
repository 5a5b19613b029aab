// LayerNorm over the last dimension on the GPU, forward and backward, plus the fused residual-add
// variant: the ops of native/ops/layernorm.h on device pointers, queued on the backend's stream.
#pragma once
#include <cstdint>

#include "../core/status.h"
#include "../ops/layernorm.h"

namespace nf::cuda {

// out = (x - mean) * rstd * gamma + beta; saves mean[rows], rstd[rows]. With `residual` non-null,
// first forms sum = x + residual (written to `sum`, which backward then takes as x).
Status run(const ops::LayerNormForward<float>& p);
Status run(const ops::LayerNormForward<ops::bf16>& p);  // x, residual, sum, out in bf16

// dx = LN'(x)^T dout (+ dadd when given); dgamma += sum(dout * xhat); dbeta += sum(dout).
// dx may alias dadd.
Status run(const ops::LayerNormBackward<float>& p);
Status run(const ops::LayerNormBackward<ops::bf16>& p);  // dx, dout, dadd, x in bf16

}  // namespace nf::cuda
