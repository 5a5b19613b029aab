// Masked mean squared error on the GPU, loss and gradient.
// Math: n = selected rows · cols; loss = Σ_selected (p − t)² / n (NaN when n = 0);
//   dpred = grad_scale · 2 (p − t) / n on selected rows, 0 elsewhere.
// Layout: pred, target, dpred [rows, cols] row-major; mask [rows] bool (nonzero = selected); loss [1].
// Dimension key: rows (B·N patches, say), cols (pixels per patch).
// Three kernels, deterministic (no atomics): (1) one block counts the selected rows; (2) a fixed
//   grid walks the elements (grid-stride), writes dpred and reduces each block's Σ (p − t)² in
//   double; (3) one block adds the blocks' sums in order and divides. Scratch: workspace slot 0.
#include "mse.h"

#include <cmath>

#include "common.cuh"

namespace nf::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kReduceThreads = 1024;
constexpr int64_t kMaxBlocks = 1024;

__global__ void __launch_bounds__(kReduceThreads)
    mse_count_kernel(long long* selected, const uint8_t* mask, int64_t rows) {
  NF_SHARED(long long[kWarp], scratch);
  long long count = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) count += (!mask || mask[r]) ? 1 : 0;
  count = block_reduce(count, SumOp{}, 0LL, scratch);
  if (threadIdx.x == 0) selected[0] = count;
}

__global__ void __launch_bounds__(kThreads)
    mse_partial_kernel(double* partial, float* dpred, const float* pred, const float* target, const uint8_t* mask,
                       const long long* selected, int64_t total, int64_t cols, double grad_scale) {
  NF_SHARED(double[kWarp], scratch);
  const double n = double(selected[0]) * double(cols);
  const float g2 = selected[0] > 0 ? float(2.0 * grad_scale / n) : 0.0f;
  double s = 0.0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    if (mask && !mask[i / cols]) {
      if (dpred) dpred[i] = 0.0f;
      continue;
    }
    const float d = pred[i] - target[i];
    s += double(d * d);
    if (dpred) dpred[i] = d * g2;
  }
  s = block_reduce(s, SumOp{}, 0.0, scratch);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

__global__ void __launch_bounds__(kReduceThreads)
    mse_mean_kernel(float* loss, const double* partial, int blocks, const long long* selected, int64_t cols) {
  NF_SHARED(double[kWarp], scratch);
  double s = 0.0;
  for (int i = int(threadIdx.x); i < blocks; i += int(blockDim.x)) s += partial[i];
  s = block_reduce(s, SumOp{}, 0.0, scratch);
  if (threadIdx.x == 0) loss[0] = selected[0] > 0 ? float(s / (double(selected[0]) * double(cols))) : NAN;
}

}  // namespace

Status mse(float* loss, float* dpred, const float* pred, const float* target, const uint8_t* mask, MseDims d) {
  const char* op = "mse";
  NF_TRY(ops::mse_check(op, d));
  NF_CHECK(d.rows <= (int64_t(1) << 40) / d.cols, op, "rows · cols must be at most 2^40");
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  const int64_t total = d.rows * d.cols;
  const int64_t blocks = reduction_blocks(total, kThreads, kMaxBlocks);
  void* p = nullptr;
  NF_TRY(workspace(0, sizeof(double) * size_t(blocks + 1), &p));
  long long* selected = static_cast<long long*>(p);
  double* partial = static_cast<double*>(p) + 1;
  NF_CUDA_TRY(op, launch(mse_count_kernel, dim3(1), dim3(kReduceThreads), 0, s, selected, mask, d.rows));
  NF_CUDA_TRY(op, launch(mse_partial_kernel, dim3(unsigned(blocks)), dim3(kThreads), 0, s, partial, dpred, pred, target,
                         mask, static_cast<const long long*>(selected), total, d.cols, d.grad_scale));
  NF_CUDA_TRY(op, launch(mse_mean_kernel, dim3(1), dim3(kReduceThreads), 0, s, loss,
                         static_cast<const double*>(partial), int(blocks), static_cast<const long long*>(selected),
                         d.cols));
  return Status::Ok();
}

Status run(const ops::Mse<float>& p) { return mse(p.loss, p.dpred, p.pred, p.target, p.mask, p.d); }

}  // namespace nf::cuda
