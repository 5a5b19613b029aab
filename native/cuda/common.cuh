// Internal to the CUDA backend's .cu files: the runtime (or emulator), the backend's stream and
// scratch buffers, and the device helpers the kernels share (warp and block reductions,
// activations).
#pragma once
#include <cstdint>

#include "runtime.h"

namespace nf::cuda {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarp = 32;

// The backend's stream on the current device.
Status backend_stream(cudaStream_t* stream);

// Device scratch memory for one op at a time: slot 0..3, at least `bytes`, kept between calls
// (grown by reallocating, so earlier pointers of the slot become invalid).
constexpr int kWorkspaceSlots = 4;
Status workspace(int slot, size_t bytes, void** ptr);

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

__device__ __forceinline__ float warp_sum(float v) {
  for (int m = kWarp / 2; m > 0; m /= 2) v += __shfl_xor_sync(kFullMask, v, m);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int m = kWarp / 2; m > 0; m /= 2) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, m));
  return v;
}

// Sum (or max) over the whole block, returned to every thread. `scratch` holds 32 floats of shared
// memory; blockDim.x must be a multiple of 32. Ends with a barrier, so scratch may be reused.
template <bool kMax>
__device__ __forceinline__ float block_reduce(float v, float* scratch) {
  const int lane = int(threadIdx.x) % kWarp, warp = int(threadIdx.x) / kWarp, warps = int(blockDim.x) / kWarp;
  v = kMax ? warp_max(v) : warp_sum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : (kMax ? -INFINITY : 0.0f);
  v = kMax ? warp_max(v) : warp_sum(v);
  __syncthreads();
  return v;
}

}  // namespace nf::cuda
