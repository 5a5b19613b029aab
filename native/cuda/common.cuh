// Internal to the CUDA backend's .cu files: the runtime (or emulator), the backend's stream and
// scratch buffers, and the device helpers the kernels share (warp and block reductions).
#pragma once
#include <cstdint>

#include "runtime.h"

namespace nf::cuda {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarp = 32;

// The backend's stream on the current device.
Status backend_stream(cudaStream_t* stream);

// Device scratch memory: slot 0..4, at least `bytes`, kept between calls (grown by reallocating,
// so earlier pointers of the slot become invalid). Ops queued one after another on the stream may
// share a slot (the stream orders them); an op must not take a slot its caller holds. In use:
// 0 = LayerNorm backward partials, GEMM split-K partials, cross-entropy scratch, attention Di,
// embedding id check, the token start's batch sums, sum_squares/clip_grad_norm and first_nonfinite
// partials; 1 = bias_grad partials; 2, 3 = the attention layer's backward (dctx, projection
// gradients), the patch embedding's patch matrix and its gradient, the feed-forward backward's dh;
// 4 = a bf16 product's bias rounded to bf16 for cuBLASLt's epilogue (gemm.cu).
constexpr int kWorkspaceSlots = 5;
Status workspace(int slot, size_t bytes, void** ptr);

// workspace() as an array of `count` T.
template <class T>
Status workspace_array(int slot, int64_t count, T** ptr) {
  void* p = nullptr;
  NF_TRY(workspace(slot, sizeof(T) * size_t(count), &p));
  *ptr = static_cast<T*>(p);
  return Status::Ok();
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The grid of a grid-stride kernel that wants `blocks` blocks: at most max_blocks (the stride does the rest).
inline dim3 capped_grid(int64_t blocks, int64_t max_blocks) {
  return dim3(unsigned(blocks < max_blocks ? blocks : max_blocks));
}

// The grid of a grid-stride reduction over n elements that leaves one partial per block:
// ⌈n / threads⌉ blocks, at least 1 (n = 0 still gives a result) and at most max_blocks.
inline int64_t reduction_blocks(int64_t n, int threads, int64_t max_blocks) {
  const int64_t b = ceil_div(n, threads);
  return b < 1 ? 1 : (b < max_blocks ? b : max_blocks);
}

struct SumOp {
  template <class T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
  __device__ __forceinline__ int operator()(int a, int b) const { return a > b ? a : b; }
};
struct MinOp {
  __device__ __forceinline__ int operator()(int a, int b) const { return a < b ? a : b; }
  __device__ __forceinline__ long long operator()(long long a, long long b) const { return a < b ? a : b; }
};

// op over the 32 lanes of a warp (butterfly: every lane gets the result).
template <class T, class Op>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
  for (int m = kWarp / 2; m > 0; m /= 2) v = op(v, __shfl_xor_sync(kFullMask, v, m));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) { return warp_reduce(v, SumOp{}); }
__device__ __forceinline__ float warp_max(float v) { return warp_reduce(v, MaxOp{}); }

// op over the whole block, returned to every thread. `scratch` holds 32 T of shared memory;
// blockDim.x must be a multiple of 32 (and y = z = 1). Ends with a barrier, so scratch may be reused.
template <class T, class Op>
__device__ __forceinline__ T block_reduce(T v, Op op, T identity, T* scratch) {
  const int lane = int(threadIdx.x) % kWarp, warp = int(threadIdx.x) / kWarp, warps = int(blockDim.x) / kWarp;
  v = warp_reduce(v, op);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = warp_reduce(lane < warps ? scratch[lane] : identity, op);
  __syncthreads();
  return v;
}

}  // namespace nf::cuda
