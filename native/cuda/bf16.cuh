// Internal: bfloat16 storage in the kernels (precision 'bf16': activations in bf16, math in fp32).
// A kernel templated on its storage type S (float or ops::bf16) reads with load(p) (a float) and
// writes with store(p, v) (rounded to nearest even for bf16, NaN kept a quiet NaN); the same source
// serves both precisions, and with S = float it compiles to the plain loads and stores it had.
// Vectors of 16 bytes (kPack<S> elements: 4 floats, 8 bf16) move with Pack<S>: load_pack/store_pack
// at an element index that is a multiple of kPack<S> from a 16-byte aligned base (the caller checks
// both; the caching allocator's blocks are 256-byte aligned), the bulk of a memory-bound kernel, the
// tail element by element.
#pragma once
#include <cstdint>
#include <cstring>

#include "../ops/schema.h"
#include "gemm.h"
#include "runtime.h"

namespace nf::cuda {

using ops::bf16;

// A float's bits and back (the device intrinsics, memcpy in host code and the emulator).
__host__ __device__ __forceinline__ uint32_t float_bits(float v) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(v);
#else
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return u;
#endif
}
__host__ __device__ __forceinline__ float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float v;
  std::memcpy(&v, &u, 4);
  return v;
#endif
}

__host__ __device__ __forceinline__ float load(const float* p) { return *p; }
__host__ __device__ __forceinline__ float load(const bf16* p) { return bits_float(uint32_t(p->bits) << 16); }

// float → bf16, round to nearest even (what __float2bfloat16_rn does; a NaN stays a quiet NaN).
__host__ __device__ __forceinline__ bf16 to_bf16(float v) {
  const uint32_t u = float_bits(v);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{uint16_t((u >> 16) | 0x40u)};
  return bf16{uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16)};
}

__host__ __device__ __forceinline__ void store(float* p, float v) { *p = v; }
__host__ __device__ __forceinline__ void store(bf16* p, float v) { *p = to_bf16(v); }

// Elements of S per 16-byte vector.
template <class S>
inline constexpr int kPack = int(16 / sizeof(S));

template <class S>
struct __align__(16) Pack {
  S v[kPack<S>];
};

// p[i .. i + kPack) as floats (p + i 16-byte aligned).
template <class S>
__host__ __device__ __forceinline__ void load_pack(const S* p, int64_t i, float (&out)[kPack<S>]) {
#if defined(__CUDA_ARCH__)
  const Pack<S> k = *reinterpret_cast<const Pack<S>*>(p + i);
#else
  Pack<S> k;
  std::memcpy(&k, p + i, sizeof k);
#endif
#pragma unroll
  for (int j = 0; j < kPack<S>; ++j) out[j] = load(&k.v[j]);
}
template <class S>
__host__ __device__ __forceinline__ void store_pack(S* p, int64_t i, const float (&in)[kPack<S>]) {
  Pack<S> k;
#pragma unroll
  for (int j = 0; j < kPack<S>; ++j) store(&k.v[j], in[j]);
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<Pack<S>*>(p + i) = k;
#else
  std::memcpy(p + i, &k, sizeof k);
#endif
}

// Whether every pointer given is 16-byte aligned (null counts as aligned).
template <class... P>
__host__ __device__ __forceinline__ bool aligned16(const P*... p) {
  return ((reinterpret_cast<uintptr_t>(p) % 16 == 0) && ...);
}

}  // namespace nf::cuda
