// float32 ↔ bfloat16 array conversions on the GPU (bf16.h). Math: bf16 = the float rounded to
// nearest even to 8 significant bits (bf16.cuh to_bf16); back, exact. Layout: flat arrays of n.
// One grid-stride loop of four elements per step when both arrays are 16-byte aligned (the float
// side one 16-byte vector, Pack<float>; the bf16 side 8 bytes), the tail element by element;
// memory-bound, no shared memory.
#include "bf16.h"

#include <type_traits>

#include "bf16.cuh"
#include "common.cuh"

namespace nf::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;

// V = 4 elements per vector step: a 16-byte float vector and an 8-byte bf16 one.
template <class D, class S>
__global__ void __launch_bounds__(kThreads) convert_kernel(D* dst, const S* src, int64_t n) {
  constexpr int V = 4;
  const int64_t bulk = aligned16(dst, src) ? n - n % V : 0, step = int64_t(gridDim.x) * blockDim.x;
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int64_t i = first * V; i < bulk; i += step * V) {
    float v[V];
    if constexpr (std::is_same_v<S, float>) {
      load_pack(src, i, v);
#pragma unroll
      for (int j = 0; j < V; ++j) store(dst + i + j, v[j]);
    } else {
#pragma unroll
      for (int j = 0; j < V; ++j) v[j] = load(src + i + j);
      store_pack(dst, i, v);
    }
  }
  for (int64_t i = bulk + first; i < n; i += step) store(dst + i, load(src + i));
}

template <class D, class S>
Status run_convert(D* dst, const S* src, int64_t n) {
  NF_CHECK(n >= 0, "cast", "n must be non-negative");
  if (n == 0) return Status::Ok();
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  NF_CUDA_TRY("cast", launch(convert_kernel<D, S>, capped_grid(ceil_div(ceil_div(n, 4), kThreads), kMaxBlocks),
                             dim3(kThreads), 0, s, dst, src, n));
  return Status::Ok();
}

}  // namespace

Status convert(bf16* dst, const float* src, int64_t n) { return run_convert(dst, src, n); }
Status convert(float* dst, const bf16* src, int64_t n) { return run_convert(dst, src, n); }

}  // namespace nf::cuda
