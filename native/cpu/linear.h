// Linear layer: y = x Wᵀ + b (PyTorch layout, W is [out, in]), with an optional fused activation.
#pragma once
#include <cstdint>

#include "gemm.h"

namespace nf::cpu {

struct LinearDims {
  int64_t rows = 0;  // B*T (every leading dimension flattened)
  int64_t in = 0;    // input features
  int64_t out = 0;   // output features
};

// y[rows,out] = act(x[rows,in] W[out,in]ᵀ + b[out]); b optional; preact (optional) receives the
// value before the activation.
Status linear_forward(float* y, float* preact, const float* x, const float* W, const float* b, LinearDims d,
                      Act act = Act::none);

// dx[rows,in] = dy W (overwritten; skipped when dx is null); dW += dyᵀ x; db += Σ_rows dy (when db).
Status linear_backward(float* dx, float* dW, float* db, const float* dy, const float* x, const float* W,
                       LinearDims d);

NF_KERNEL_DECL(void linear_forward(float* y, float* preact, const float* x, const float* W, const float* b,
                                   const LinearDims& d, Act act))
NF_KERNEL_DECL(void linear_backward(float* dx, float* dW, float* db, const float* dy, const float* x,
                                    const float* W, const LinearDims& d))
// db[n] += Σ_rows dy[row, n] for dy [rows, n]: the bias gradient of any row-broadcast bias.
NF_KERNEL_DECL(void bias_grad(float* db, const float* dy, int64_t rows, int64_t n))

}  // namespace nf::cpu
