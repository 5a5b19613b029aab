// Internal: Philox4x32-10 for device (and host) code, bit for bit the generator of
// native/core/philox.h (which is host-only C++ the kernels cannot call): element i of the stream
// (seed, offset) is lane i % 4 of the block for counter (i / 4, offset); uniform = (bits >> 8)·2^-24;
// dropout keeps an element when uniform >= p. The parity tests compare the two.
#pragma once
#include <cstdint>

#include "runtime.h"

namespace nf::cuda {

__host__ __device__ __forceinline__ uint32_t philox4x32_10_lane(uint64_t counter, uint64_t offset, uint64_t seed,
                                                                unsigned lane) {
  uint32_t c0 = uint32_t(counter), c1 = uint32_t(counter >> 32), c2 = uint32_t(offset), c3 = uint32_t(offset >> 32);
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t(0xD2511F53u) * c0, p1 = uint64_t(0xCD9E8D57u) * c2;
    const uint32_t n0 = uint32_t(p1 >> 32) ^ c1 ^ k0, n1 = uint32_t(p1);
    const uint32_t n2 = uint32_t(p0 >> 32) ^ c3 ^ k1, n3 = uint32_t(p0);
    c0 = n0, c1 = n1, c2 = n2, c3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return lane == 0 ? c0 : lane == 1 ? c1 : lane == 2 ? c2 : c3;
}

__host__ __device__ __forceinline__ float philox_uniform(uint64_t seed, uint64_t offset, uint64_t index) {
  return float(philox4x32_10_lane(index >> 2, offset, seed, unsigned(index & 3)) >> 8) * (1.0f / 16777216.0f);
}

__host__ __device__ __forceinline__ bool dropout_keep(uint64_t seed, uint64_t offset, uint64_t index, float p) {
  return p <= 0.0f || philox_uniform(seed, offset, index) >= p;
}

}  // namespace nf::cuda
