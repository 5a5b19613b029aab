// Sum of squares, scaling and gradient-norm clipping on the GPU.
// Math: out = Σ_i x_i² (double accumulators); x ← s·x; clip_grad_norm (torch.nn.utils.
//   clip_grad_norm_ on one buffer, as the CPU kernel): total = sqrt(Σ g²), coef = maxNorm /
//   (total + 1e-6) in double; g ← float(coef)·g unless coef ≥ 1 (a NaN norm scales by NaN);
//   totalNorm = float(total).
// Layout: flat [n] arrays (clip_grad_norm's: one gradient arena or tensor); out, totalNorm [1].
// Dimension key: n = elements of the gradient buffer.
// sum_squares: a fixed grid of at most kMaxBlocks blocks, each thread summing a grid-stride slice in
//   double and the block reducing it (partials in workspace slot 0), then one block adds the
//   partials in order: deterministic, independent of timing. scale: a grid-stride loop.
//   clip_grad_norm: the same partials; the one block that adds them also writes totalNorm and the
//   coefficient (a double after the partials), which the scaling kernel reads on the device: no
//   copy to the host, nothing waits.
#include "grad_norm.h"

#include <cmath>

#include "bf16.cuh"
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

// Σ partial[0 .. blocks) in a fixed order, returned to every thread of the (single) block.
__device__ __forceinline__ double add_partials(const double* partial, int blocks, double* scratch) {
  double s = 0.0;
  for (int i = int(threadIdx.x); i < blocks; i += int(blockDim.x)) s += partial[i];
  return block_reduce(s, SumOp{}, 0.0, scratch);
}

__global__ void __launch_bounds__(kReduceThreads) sum_partials_kernel(float* out, const double* partial, int blocks) {
  NF_SHARED(double[kWarp], scratch);
  const double s = add_partials(partial, blocks, scratch);
  if (threadIdx.x == 0) out[0] = float(s);
}

// total_norm[0] = sqrt(Σ partials); coef[0] = max_norm / (total + 1e-6).
__global__ void __launch_bounds__(kReduceThreads)
    clip_norm_kernel(float* total_norm, double* coef, const double* partial, int blocks, double max_norm) {
  NF_SHARED(double[kWarp], scratch);
  const double total = sqrt(add_partials(partial, blocks, scratch));
  if (threadIdx.x == 0) {
    total_norm[0] = float(total);
    coef[0] = ops::clip_coefficient(max_norm, total);
  }
}

// x *= s over float32, or over a bf16 loss gradient (precision 'bf16': gradient accumulation's 1/k).
template <class S>
__global__ void __launch_bounds__(kThreads) scale_kernel(S* x, int64_t n, float s) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    store(x + i, load(x + i) * s);
}

// x *= coef[0] unless coef[0] ≥ 1 (NaN scales).
__global__ void __launch_bounds__(kThreads) clip_scale_kernel(float* x, int64_t n, const double* coef) {
  const double c = coef[0];
  if (c >= 1.0) return;
  const float s = float(c);
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    x[i] *= s;
}

// coef[0] = max_norm / (sqrt(Σ sums) + 1e-6), the sums added in order in double (one thread: n is
// the number of gradient tensors); total_norm[0] = the square root.
__global__ void clip_coefficient_kernel(float* total_norm, double* coef, const float* sums, int64_t n, double max_norm) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += double(sums[i]);
  const double total = sqrt(s);
  coef[0] = ops::clip_coefficient(max_norm, total);
  total_norm[0] = float(total);
}

int64_t scale_blocks(int64_t n) { return ceil_div(n, kThreads) < kMaxScaleBlocks ? ceil_div(n, kThreads) : kMaxScaleBlocks; }

}  // namespace

Status sum_squares(float* out, const float* x, int64_t n) {
  const char* op = "sum_squares";
  NF_CHECK(n >= 0, op, "n must be non-negative");
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  const int64_t blocks = reduction_blocks(n, kThreads, kMaxBlocks);
  double* partial = nullptr;
  NF_TRY(workspace_array(0, blocks, &partial));
  NF_CUDA_TRY(op, launch(sum_squares_partial_kernel, dim3(unsigned(blocks)), dim3(kThreads), 0, s, partial, x, n));
  NF_CUDA_TRY(op, launch(sum_partials_kernel, dim3(1), dim3(kReduceThreads), 0, s, out,
                         static_cast<const double*>(partial), int(blocks)));
  return Status::Ok();
}

template <class S>
Status scale_values(S* x, int64_t n, float factor) {
  NF_CHECK(n >= 0, "scale", "n must be non-negative");
  if (n == 0) return Status::Ok();
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  NF_CUDA_TRY("scale", launch(scale_kernel<S>, dim3(unsigned(scale_blocks(n))), dim3(kThreads), 0, s, x, n, factor));
  return Status::Ok();
}

Status scale(float* x, int64_t n, float factor) { return scale_values(x, n, factor); }

Status clip_grad_norm(float* total_norm, float* grad, int64_t n, double max_norm) {
  const char* op = "clip_grad_norm";
  NF_CHECK(n >= 0, op, "n must be non-negative");
  NF_CHECK(max_norm >= 0 && std::isfinite(max_norm), op, "max_norm must be finite and non-negative");
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  const int64_t blocks = reduction_blocks(n, kThreads, kMaxBlocks);
  double* partial = nullptr;  // the blocks' partials, then the coefficient
  NF_TRY(workspace_array(0, blocks + 1, &partial));
  double* coef = partial + blocks;
  NF_CUDA_TRY(op, launch(sum_squares_partial_kernel, dim3(unsigned(blocks)), dim3(kThreads), 0, s, partial,
                         static_cast<const float*>(grad), n));
  NF_CUDA_TRY(op, launch(clip_norm_kernel, dim3(1), dim3(kReduceThreads), 0, s, total_norm, coef,
                         static_cast<const double*>(partial), int(blocks), max_norm));
  if (n > 0)
    NF_CUDA_TRY(op, launch(clip_scale_kernel, dim3(unsigned(scale_blocks(n))), dim3(kThreads), 0, s, grad, n,
                           static_cast<const double*>(coef)));
  return Status::Ok();
}

Status run(const ops::ClipCoefficient<float>& p) {
  const char* op = "clip_coefficient";
  NF_CHECK(p.n >= 0, op, "n must be non-negative");
  NF_CHECK(p.max_norm >= 0 && std::isfinite(p.max_norm), op, "max_norm must be finite and non-negative");
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  NF_CUDA_TRY(op, launch(clip_coefficient_kernel, dim3(1), dim3(1), 0, s, p.total_norm, p.coef, p.sums, p.n, p.max_norm));
  return Status::Ok();
}

Status run(const ops::ClipScale<float>& p) {
  NF_CHECK(p.n >= 0, "clip_scale", "n must be non-negative");
  if (p.n == 0) return Status::Ok();
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  NF_CUDA_TRY("clip_scale", launch(clip_scale_kernel, dim3(unsigned(scale_blocks(p.n))), dim3(kThreads), 0, s, p.x, p.n, p.coef));
  return Status::Ok();
}

Status run(const ops::SumSquares<float>& p) { return sum_squares(p.out, p.x, p.n); }
Status run(const ops::Scale<float>& p) { return scale(p.x, p.n, float(p.s)); }
Status run(const ops::Scale<bf16>& p) { return scale_values(p.x, p.n, float(p.s)); }
Status run(const ops::ClipGradNorm<float>& p) { return clip_grad_norm(p.total_norm, p.grad, p.n, p.max_norm); }

}  // namespace nf::cuda
