// Internal: the activation functions on scalars for device code (and host code: the same formulas
// as native/cpu/activation_inl.h, with CUDA's erff/tanhf/expf).
//   relu(x) = max(x, 0)                        relu'(x) = [x > 0]
//   gelu(x) = ½ x (1 + erf(x/√2))              gelu'(x) = Φ(x) + x φ(x), φ(x) = e^{-x²/2}/√(2π)
//   gelu_tanh(x) = ½ x (1 + tanh u), u = √(2/π) (x + 0.044715 x³)
//   gelu_tanh'(x) = ½ (1 + tanh u) + ½ x (1 − tanh² u) √(2/π) (1 + 3·0.044715 x²)
//   silu(x) = x σ(x), σ(x) = 1 / (1 + e^{-x})    silu'(x) = σ(x) (1 + x (1 − σ(x)))
//   tanh(x)                                     tanh'(x) = 1 − tanh² x
// reduced (the products of precision 'bf16'): GELU's Φ from normcdf_reduced, the CPU's Φ for the
// GELU fused into its bf16 and int8 products (native/cpu/simd.h vnormcdf_reduced: |error| < 1e-6,
// far below bf16's 2^-9, no relative accuracy in the lower tail): 36 PTX instructions to erff's 40 in a
// one-element kernel (sm_90, loads and stores included). The derivative keeps erff and expf.
#pragma once
#include "gemm.h"
#include "runtime.h"

namespace nf::cuda {

// Φ(x) = ½ erfc(−x/√2) by Abramowitz & Stegun 7.1.28, erfc(z) ≈ (1 + a₁z + … + a₆z⁶)^−16 for z ≥ 0
// (the same coefficients and steps as vnormcdf_reduced; a correctly rounded reciprocal, as its
// division): ½ erfc(|x|/√2) = Φ(−|x|).
__host__ __device__ __forceinline__ float normcdf_reduced(float x) {
  const float z = fabsf(x) * 0.70710678118654752f;
  float p = 0.0000430638f;
  p = fmaf(p, z, 0.0002765672f);
  p = fmaf(p, z, 0.0001520143f);
  p = fmaf(p, z, 0.0092705272f);
  p = fmaf(p, z, 0.0422820123f);
  p = fmaf(p, z, 0.0705230784f);
  p = fmaf(p, z, 1.0f);
#if defined(__CUDA_ARCH__)
  float t = __frcp_rn(p);  // (rcp.rn.f32: 1 / p correctly rounded, as the division gives it, for less)
#else
  float t = 1.0f / p;
#endif
  t *= t;
  t *= t;
  t *= t;
  const float tail = t * t * 0.5f;
  return x < 0.0f ? tail : 1.0f - tail;
}

__host__ __device__ __forceinline__ float act_forward(float x, Act act, bool reduced = false) {
  switch (act) {
    case Act::relu: return x > 0.0f ? x : 0.0f;
    case Act::gelu: return reduced ? x * normcdf_reduced(x) : 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
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
