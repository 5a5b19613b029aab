// LayerNorm over the last dimension, forward and backward, plus the fused residual-add variant.
#pragma once
#include <cstdint>

#include "kernel_decl.h"

namespace nf::cpu {

struct LayerNormDims {
  int64_t rows = 0;  // B*T: every row is normalised independently
  int64_t D = 0;     // normalised width
  float eps = 1e-5f;
};

// out = (x - mean) * rstd * gamma + beta; saves mean[rows], rstd[rows].
// With `residual` non-null, first forms sum = x + residual (written to `sum`, which then is
// what backward takes as x): the fused residual-add + LayerNorm of a post-LN block.
Status layernorm_forward(float* out, float* sum, float* mean, float* rstd, const float* x,
                         const float* residual, const float* gamma, const float* beta, LayerNormDims d);

// dx = LN'(x)^T dout (+ dadd when given: a gradient reaching x along another path, e.g. the
// residual stream, fused in); dgamma += sum(dout * xhat); dbeta += sum(dout). dx may alias dadd.
Status layernorm_backward(float* dx, float* dgamma, float* dbeta, const float* dout, const float* dadd,
                          const float* x, const float* mean, const float* rstd, const float* gamma,
                          LayerNormDims d);

NF_KERNEL_DECL(void layernorm_forward(float* out, float* sum, float* mean, float* rstd, const float* x,
                                      const float* residual, const float* gamma, const float* beta,
                                      const LayerNormDims& d))
NF_KERNEL_DECL(void layernorm_backward(float* dx, float* dgamma, float* dbeta, const float* dout,
                                       const float* dadd, const float* x, const float* mean,
                                       const float* rstd, const float* gamma, const LayerNormDims& d))

}  // namespace nf::cpu
