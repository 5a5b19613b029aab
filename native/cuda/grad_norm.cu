// Sum of squares and scaling on the GPU (gradient-norm clipping).
// Math: out = Σ_i x_i² (double accumulators); x ← s·x.
// Layout: flat [n] arrays; out [1].
// Dimension key: n = elements of one gradient tensor.
// sum_squares: a fixed grid of at most kMaxBlocks blocks, each thread summing a grid-stride slice in
//   double and the block reducing it (partials in workspace slot 0), then one block adds the
//   partials in order: deterministic, independent of timing. scale: a grid-stride loop.
#include "grad_norm.h"

#include "common.cuh"

namespace nf::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kReduceThreads = 1024;
constexpr int64_t kMaxBlocks = 1024;      // sum_squares partials (one per block)
constexpr int64_t kMaxScaleBlocks = 4096;

__global__ void __launch_bounds__(kThreads) sum_squares_partial_kernel(double* partial, const float* x, int64_t n) {
  NF_SHARED(double[kWarp], scratch);
  double s = 0.0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float v = x[i];
    s += double(v) * double(v);
  }
  s = block_reduce(s, SumOp{}, 0.0, scratch);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

__global__ void __launch_bounds__(kReduceThreads) sum_partials_kernel(float* out, const double* partial, int blocks) {
  NF_SHARED(double[kWarp], scratch);
  double s = 0.0;
  for (int i = int(threadIdx.x); i < blocks; i += int(blockDim.x)) s += partial[i];
  s = block_reduce(s, SumOp{}, 0.0, scratch);
  if (threadIdx.x == 0) out[0] = float(s);
}

__global__ void __launch_bounds__(kThreads) scale_kernel(float* x, int64_t n, float s) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    x[i] *= s;
}

}  // namespace

Status sum_squares(float* out, const float* x, int64_t n) {
  const char* op = "sum_squares";
  NF_CHECK(n >= 0, op, "n must be non-negative");
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  const int64_t blocks = n == 0 ? 1 : (ceil_div(n, kThreads) < kMaxBlocks ? ceil_div(n, kThreads) : kMaxBlocks);
  void* p = nullptr;
  NF_TRY(workspace(0, sizeof(double) * size_t(blocks), &p));
  double* partial = static_cast<double*>(p);
  NF_CUDA_TRY(op, launch(sum_squares_partial_kernel, dim3(unsigned(blocks)), dim3(kThreads), 0, s, partial, x, n));
  NF_CUDA_TRY(op, launch(sum_partials_kernel, dim3(1), dim3(kReduceThreads), 0, s, out,
                         static_cast<const double*>(partial), int(blocks)));
  return Status::Ok();
}

Status scale(float* x, int64_t n, float factor) {
  NF_CHECK(n >= 0, "scale", "n must be non-negative");
  if (n == 0) return Status::Ok();
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  const int64_t blocks = ceil_div(n, kThreads) < kMaxScaleBlocks ? ceil_div(n, kThreads) : kMaxScaleBlocks;
  NF_CUDA_TRY("scale", launch(scale_kernel, dim3(unsigned(blocks)), dim3(kThreads), 0, s, x, n, factor));
  return Status::Ok();
}

Status run(const ops::SumSquares<float>& p) { return sum_squares(p.out, p.x, p.n); }
Status run(const ops::Scale<float>& p) { return scale(p.x, p.n, float(p.s)); }

}  // namespace nf::cuda
