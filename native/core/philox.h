// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011), the
// counter-based generator of cuRAND and PyTorch. Random numbers are a pure function of
// (seed, offset, index), so a backward pass regenerates exactly the forward's dropout mask and
// the CPU and CUDA backends draw the same numbers for the same seed.
//
// Element i of a stream uses lane (i % 4) of the block for counter (i / 4, offset):
//   counter words = [lo32(i/4), hi32(i/4), lo32(offset), hi32(offset)], key = [lo32(seed), hi32(seed)].
// uniform = (bits >> 8) * 2^-24 in [0, 1); an element is kept by dropout(p) when uniform >= p.
#pragma once
#include <cstdint>

namespace nf {

struct PhiloxBlock {
  uint32_t v[4];
};

inline PhiloxBlock philox4x32_10(uint64_t counter, uint64_t offset, uint64_t seed) {
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32);
  uint32_t c2 = static_cast<uint32_t>(offset), c3 = static_cast<uint32_t>(offset >> 32);
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = uint64_t(0xD2511F53u) * c0, p1 = uint64_t(0xCD9E8D57u) * c2;
    uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    uint32_t n1 = static_cast<uint32_t>(p1);
    uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    uint32_t n3 = static_cast<uint32_t>(p0);
    c0 = n0, c1 = n1, c2 = n2, c3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return PhiloxBlock{{c0, c1, c2, c3}};
}

inline float philox_bits_to_uniform(uint32_t bits) { return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f); }

// The uniform number for element `index` of the stream (seed, offset).
inline float philox_uniform(uint64_t seed, uint64_t offset, uint64_t index) {
  return philox_bits_to_uniform(philox4x32_10(index >> 2, offset, seed).v[index & 3]);
}

// Whether dropout with probability p keeps element `index` of the stream (seed, offset).
inline bool dropout_keep(uint64_t seed, uint64_t offset, uint64_t index, float p) {
  return p <= 0.0f || philox_uniform(seed, offset, index) >= p;
}

}  // namespace nf
