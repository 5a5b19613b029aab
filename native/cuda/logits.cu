// Softmax, log-softmax, argmax and top-k along the last axis of [rows, cols] logits, on the GPU.
// Math (row x of n = cols values): m = max x, S = Σ_c e^(x_c − m); softmax_c = e^(x_c − m) / S,
//   log_softmax_c = x_c − m − log S; argmax / topk: the first value(s) in ops::logit_before's order
//   (larger first, NaN first of all, ties by lower index).
// Layout: x, out [rows, cols] row-major; argmax out [rows] int32; topk values, indices [rows, k].
// Dimension key: rows = sequences (B or B·beams), cols = V, the vocabulary; k <= cols.
// One block of 256 threads per row. Softmax: a block max, a block sum of e^(x − m), then the outputs.
// Argmax: each thread keeps the best of its strided values, then a block reduction of (value, index)
// pairs. Top-k repeats that k times, each time over the values ordered after the previous winner, so a
// row costs O(k · cols / 256): meant for the small k of sampling (topK), not for sorting whole rows.
#include "logits.h"

#include <cmath>

#include "common.cuh"

namespace nf::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) softmax_kernel(float* out, const float* x, int cols, bool log) {
  NF_SHARED(float[kWarp], scratch);
  const float* xr = x + int64_t(blockIdx.x) * cols;
  float* yr = out + int64_t(blockIdx.x) * cols;
  float m = -INFINITY;
  for (int c = int(threadIdx.x); c < cols; c += int(blockDim.x)) m = fmaxf(m, xr[c]);
  m = block_reduce(m, MaxOp{}, -INFINITY, scratch);
  float s = 0.0f;
  for (int c = int(threadIdx.x); c < cols; c += int(blockDim.x)) s += expf(xr[c] - m);
  s = block_reduce(s, SumOp{}, 0.0f, scratch);
  const float shift = m + logf(s), inv = 1.0f / s;
  for (int c = int(threadIdx.x); c < cols; c += int(blockDim.x)) yr[c] = log ? xr[c] - shift : expf(xr[c] - m) * inv;
}

// A candidate of the argmax order: value v at index i (i = -1: none yet).
struct Best {
  float v;
  int i;
};

__device__ __forceinline__ Best better(Best a, Best b) {
  if (a.i < 0) return b;
  if (b.i < 0) return a;
  return ops::logit_before(b.v, b.i, a.v, a.i) ? b : a;
}

// The first value of row xr in the argmax order among those ordered after `after` (every value when
// after.i < 0), returned to every thread. `vs`, `is` hold kWarp values of shared memory each.
__device__ Best block_best(const float* xr, int cols, Best after, float* vs, int* is) {
  Best b{0.0f, -1};
  for (int c = int(threadIdx.x); c < cols; c += int(blockDim.x))
    if (after.i < 0 || ops::logit_before(after.v, after.i, xr[c], c)) b = better(b, Best{xr[c], c});
  for (int m = kWarp / 2; m > 0; m /= 2)
    b = better(b, Best{__shfl_xor_sync(kFullMask, b.v, m), __shfl_xor_sync(kFullMask, b.i, m)});
  const int lane = int(threadIdx.x) % kWarp, warp = int(threadIdx.x) / kWarp, warps = int(blockDim.x) / kWarp;
  if (lane == 0) {
    vs[warp] = b.v;
    is[warp] = b.i;
  }
  __syncthreads();
  b = lane < warps ? Best{vs[lane], is[lane]} : Best{0.0f, -1};
  for (int m = kWarp / 2; m > 0; m /= 2)
    b = better(b, Best{__shfl_xor_sync(kFullMask, b.v, m), __shfl_xor_sync(kFullMask, b.i, m)});
  __syncthreads();
  return b;
}

__global__ void __launch_bounds__(kThreads) topk_kernel(float* values, int32_t* indices, const float* x, int cols, int k) {
  NF_SHARED(float[kWarp], vs);
  NF_SHARED(int[kWarp], is);
  const float* xr = x + int64_t(blockIdx.x) * cols;
  Best b{0.0f, -1};
  for (int j = 0; j < k; ++j) {
    b = block_best(xr, cols, b, vs, is);
    if (threadIdx.x == 0) {
      if (values) values[int64_t(blockIdx.x) * k + j] = b.v;
      indices[int64_t(blockIdx.x) * k + j] = b.i;
    }
  }
}

Status check_rows(const char* op, int64_t rows, int64_t cols) {
  NF_CHECK(rows >= 0 && rows < (int64_t(1) << 31), op, "rows must be in [0, 2^31)");
  NF_CHECK(cols >= 1 && cols < (int64_t(1) << 31), op, "cols must be in [1, 2^31)");
  return Status::Ok();
}

Status softmax(const char* op, float* out, const float* x, int64_t rows, int64_t cols, bool log) {
  NF_TRY(check_rows(op, rows, cols));
  if (rows == 0) return Status::Ok();
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  NF_CUDA_TRY(op, launch(softmax_kernel, dim3(unsigned(rows)), dim3(kThreads), 0, s, out, x, int(cols), log));
  return Status::Ok();
}

// The first k indices (and values, when given) of every row in the argmax order.
Status topk(const char* op, float* values, int32_t* indices, const float* x, int64_t rows, int64_t cols, int64_t k) {
  NF_TRY(check_rows(op, rows, cols));
  NF_CHECK(k >= 1 && k <= cols, op, "k must lie in [1, cols]");
  if (rows == 0) return Status::Ok();
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  NF_CUDA_TRY(op, launch(topk_kernel, dim3(unsigned(rows)), dim3(kThreads), 0, s, values, indices, x, int(cols), int(k)));
  return Status::Ok();
}

}  // namespace

Status run(const ops::Softmax<float>& p) { return softmax("softmax", p.out, p.x, p.rows, p.cols, false); }

Status run(const ops::LogSoftmax<float>& p) { return softmax("log_softmax", p.out, p.x, p.rows, p.cols, true); }

Status run(const ops::Argmax<float>& p) { return topk("argmax", nullptr, p.out, p.x, p.rows, p.cols, 1); }

Status run(const ops::Topk<float>& p) { return topk("topk", p.values, p.indices, p.x, p.rows, p.cols, p.k); }

}  // namespace nf::cuda
