// LayerNorm over the last dimension, forward and backward, plus the fused residual-add variant
// (the op and its fields: native/ops/layernorm.h).
#pragma once
#include <cstdint>

#include "../ops/layernorm.h"
#include "kernel_decl.h"

namespace nf::cpu {

// out = (x - mean) * rstd * gamma + beta; saves mean[rows], rstd[rows]. With `residual` non-null,
// first forms sum = x + residual (written to `sum`, which then is what backward takes as x): the
// fused residual-add + LayerNorm of a post-LN block.
Status run(const ops::LayerNormForward<float>& p);

// dx = LN'(x)^T dout (+ dadd when given: a gradient reaching x along another path, e.g. the
// residual stream, fused in); dgamma += sum(dout * xhat); dbeta += sum(dout). dx may alias dadd.
Status run(const ops::LayerNormBackward<float>& p);

NF_KERNEL_DECL(void layernorm_forward(const ops::LayerNormForward<float>& p))
NF_KERNEL_DECL(void layernorm_backward(const ops::LayerNormBackward<float>& p))

}  // namespace nf::cpu
