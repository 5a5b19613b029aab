// Internal: the activation functions on scalars for device code (and host code: the same formulas
// as native/cpu/activation_inl.h, with CUDA's erff/tanhf/expf).
//   relu(x) = max(x, 0)                        relu'(x) = [x > 0]
//   gelu(x) = ½ x (1 + erf(x/√2))              gelu'(x) = Φ(x) + x φ(x), φ(x) = e^{-x²/2}/√(2π)
//   gelu_tanh(x) = ½ x (1 + tanh u), u = √(2/π) (x + 0.044715 x³)
//   gelu_tanh'(x) = ½ (1 + tanh u) + ½ x (1 − tanh² u) √(2/π) (1 + 3·0.044715 x²)
//   silu(x) = x σ(x), σ(x) = 1 / (1 + e^{-x})    silu'(x) = σ(x) (1 + x (1 − σ(x)))
//   tanh(x)                                     tanh'(x) = 1 − tanh² x
#pragma once
#include "gemm.h"
#include "runtime.h"

namespace nf::cuda {

__host__ __device__ __forceinline__ float act_forward(float x, Act act) {
  switch (act) {
    case Act::relu: return x > 0.0f ? x : 0.0f;
    case Act::gelu: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case Act::gelu_tanh: return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * fmaf(0.044715f * x, x * x, x)));
    case Act::silu: return x / (1.0f + expf(-x));
    case Act::tanh: return tanhf(x);
    default: return x;
  }
}

__host__ __device__ __forceinline__ float act_derivative(float x, Act act) {
  switch (act) {
    case Act::relu: return x > 0.0f ? 1.0f : 0.0f;
    case Act::gelu: {
      const float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752f));
      const float pdf = 0.39894228040143268f * expf(-0.5f * x * x);
      return fmaf(x, pdf, cdf);
    }
    case Act::gelu_tanh: {
      const float x2 = x * x;
      const float t = tanhf(0.79788456080286536f * x * fmaf(0.044715f, x2, 1.0f));
      const float du = 0.79788456080286536f * fmaf(3.0f * 0.044715f, x2, 1.0f);
      return fmaf(0.5f * x, (1.0f - t * t) * du, 0.5f * (1.0f + t));
    }
    case Act::silu: {
      const float s = 1.0f / (1.0f + expf(-x));
      return s * fmaf(x, 1.0f - s, 1.0f);
    }
    case Act::tanh: {
      const float t = tanhf(x);
      return fmaf(-t, t, 1.0f);
    }
    default: return 1.0f;
  }
}

}  // namespace nf::cuda
