// The device-side Philox of the CUDA backend (philox.cuh) draws exactly the numbers of
// native/core/philox.h, so the same seed gives the same dropout mask on both backends. (Host
// compilation of the same __host__ __device__ source; the attention parity tests check the device
// path against the CPU reference's masks.)
#include <random>

#include "../../core/philox.h"
#include "../philox.cuh"
#include "harness.h"

namespace {

NF_TEST(emulator_philox_matches_core) {
  std::mt19937_64 r(7);
  int mismatches = 0;
  for (int n = 0; n < 20000; ++n) {
    const uint64_t seed = r(), offset = r() >> (n % 64), index = r() >> (n % 61);
    mismatches += nf::cuda::philox_uniform(seed, offset, index) != nf::philox_uniform(seed, offset, index);
    mismatches += nf::cuda::dropout_keep(seed, offset, index, 0.3f) != nf::dropout_keep(seed, offset, index, 0.3f);
  }
  NF_EXPECT(mismatches == 0, std::to_string(mismatches) + " mismatches");
}

}  // namespace
