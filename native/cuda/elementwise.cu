// Elementwise ops on the GPU: add, dropout, strided row copy, per-channel scale.
// Math: out = a + b; out = x · keep_i / (1 − p) with keep_i = (Philox uniform of element i ≥ p);
//   copy_rows moves a rows x cols block between row strides; channel scale (timm's LayerScale):
//   y[r, c] = x[r, c] · gamma[c], backward dgamma[c] += Σ_r dy[r, c] · x[r, c] (linear.cu's
//   deterministic column sums), then dx = dy · gamma (the forward's kernel).
// Layout: flat arrays of n elements; copy_rows: row-major with the given row strides; channel
//   scale: [rows, cols] row-major, gamma [cols].
// Dimension key: n elements; rows, cols of the copied block; rows = B*T, cols = D (channel scale).
// Grid-stride loops, memory-bound; no shared memory, no barriers. add, dropout, copy_rows and the
// channel scale are templated on the storage S (float, or bf16 under precision 'bf16'; bf16.cuh;
// gamma and its gradient float), math in float; add and dropout move 16-byte vectors (4 floats,
// 8 bf16) when their arrays are 16-byte aligned, the tail element by element.
#include "elementwise.h"

#include "bf16.cuh"
#include "common.cuh"
#include "linear.h"
#include "philox.cuh"

namespace nf::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;

// The elements [0, n) as the vectors of the aligned bulk, then the tail: f(v, i) for element i.
template <class S>
__device__ __forceinline__ int64_t vector_elements(int64_t n, bool aligned) {
  return aligned ? n - n % kPack<S> : 0;
}

template <class S>
__global__ void __launch_bounds__(kThreads) add_kernel(S* out, const S* a, const S* b, int64_t n) {
  constexpr int V = kPack<S>;
  const int64_t bulk = vector_elements<S>(n, aligned16(out, a, b)), step = int64_t(gridDim.x) * blockDim.x;
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int64_t i = first * V; i < bulk; i += step * V) {
    float x[V], y[V];
    load_pack(a, i, x);
    load_pack(b, i, y);
#pragma unroll
    for (int j = 0; j < V; ++j) x[j] += y[j];
    store_pack(out, i, x);
  }
  for (int64_t i = bulk + first; i < n; i += step) store(out + i, load(a + i) + load(b + i));
}

template <class S>
__global__ void __launch_bounds__(kThreads)
    dropout_kernel(S* out, const S* x, int64_t n, float p, float scale, uint64_t seed_arg, const double* seed_from,
                   uint64_t offset) {
  const uint64_t seed = seed_from ? uint64_t(*seed_from) : seed_arg;
  constexpr int V = kPack<S>;
  const int64_t bulk = vector_elements<S>(n, aligned16(out, x)), step = int64_t(gridDim.x) * blockDim.x;
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int64_t i = first * V; i < bulk; i += step * V) {
    float v[V];
    load_pack(x, i, v);
#pragma unroll
    for (int j = 0; j < V; ++j) v[j] = dropout_keep(seed, offset, uint64_t(i + j), p) ? v[j] * scale : 0.0f;
    store_pack(out, i, v);
  }
  for (int64_t i = bulk + first; i < n; i += step)
    store(out + i, dropout_keep(seed, offset, uint64_t(i), p) ? load(x + i) * scale : 0.0f);
}

template <class S>
__global__ void __launch_bounds__(kThreads)
    copy_rows_kernel(S* dst, int64_t dst_stride, const S* src, int64_t src_stride, int64_t total, int64_t cols) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols, c = i % cols;
    dst[r * dst_stride + c] = src[r * src_stride + c];
  }
}

template <class S>
__global__ void __launch_bounds__(kThreads)
    channel_scale_kernel(S* y, const S* x, const float* gamma, int64_t total, int cols) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)
    store(y + i, load(x + i) * gamma[i % cols]);
}

dim3 blocks_for(int64_t total) { return capped_grid(ceil_div(total, kThreads), kMaxBlocks); }

}  // namespace

template <class S>
Status add(S* out, const S* a, const S* b, int64_t n) {
  NF_CHECK(n >= 0, "add", "n must be non-negative");
  if (n == 0) return Status::Ok();
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  NF_CUDA_TRY("add", launch(add_kernel<S>, blocks_for(ceil_div(n, kPack<S>)), dim3(kThreads), 0, s, out, a, b, n));
  return Status::Ok();
}
template Status add<float>(float*, const float*, const float*, int64_t);
template Status add<bf16>(bf16*, const bf16*, const bf16*, int64_t);

template <class S>
Status dropout(S* out, const S* x, int64_t n, float p, uint64_t seed, uint64_t offset, const double* seed_from) {
  NF_CHECK(n >= 0, "dropout", "n must be non-negative");
  NF_CHECK(p >= 0.0f && p < 1.0f, "dropout", "p must be in [0, 1)");
  if (n == 0) return Status::Ok();
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  NF_CUDA_TRY("dropout", launch(dropout_kernel<S>, blocks_for(ceil_div(n, kPack<S>)), dim3(kThreads), 0, s, out, x, n,
                                p, float(1.0 / (1.0 - double(p))), seed, seed_from, offset));
  return Status::Ok();
}
template Status dropout<float>(float*, const float*, int64_t, float, uint64_t, uint64_t, const double*);
template Status dropout<bf16>(bf16*, const bf16*, int64_t, float, uint64_t, uint64_t, const double*);

template <class S>
Status copy_rows(S* dst, int64_t dst_stride, const S* src, int64_t src_stride, int64_t rows, int64_t cols) {
  NF_CHECK(rows >= 0 && cols >= 0, "copy_rows", "rows and cols must be non-negative");
  NF_CHECK(dst_stride >= cols && src_stride >= cols, "copy_rows", "strides must be at least cols");
  if (rows == 0 || cols == 0) return Status::Ok();
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  NF_CUDA_TRY("copy_rows", launch(copy_rows_kernel<S>, blocks_for(rows * cols), dim3(kThreads), 0, s, dst,
                                  dst_stride, src, src_stride, rows * cols, cols));
  return Status::Ok();
}
template Status copy_rows<float>(float*, int64_t, const float*, int64_t, int64_t, int64_t);

// y = x · gamma per column of [rows, cols] (y may be x).
template <class S>
Status channel_scale(const char* op, S* y, const S* x, const float* gamma, int64_t rows, int64_t cols) {
  NF_CHECK(rows >= 0 && cols >= 1 && cols < (int64_t(1) << 31), op, "rows must be non-negative, cols in [1, 2^31)");
  if (rows == 0) return Status::Ok();
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  NF_CUDA_TRY(op, launch(channel_scale_kernel<S>, blocks_for(rows * cols), dim3(kThreads), 0, s, y, x, gamma,
                         rows * cols, int(cols)));
  return Status::Ok();
}

template <class S>
Status channel_scale_backward(const ops::ChannelScaleBackward<S>& p) {
  NF_TRY(bias_grad(p.dgamma, p.dy, p.rows, p.cols, p.x));  // before dx, which may be dy (one stream)
  return p.dx ? channel_scale("channel_scale_backward", p.dx, p.dy, p.gamma, p.rows, p.cols) : Status::Ok();
}

Status run(const ops::ChannelScaleForward<float>& p) {
  return channel_scale("channel_scale_forward", p.y, p.x, p.gamma, p.rows, p.cols);
}
Status run(const ops::ChannelScaleForward<bf16>& p) {
  return channel_scale("channel_scale_forward", p.y, p.x, p.gamma, p.rows, p.cols);
}
Status run(const ops::ChannelScaleBackward<float>& p) { return channel_scale_backward(p); }
Status run(const ops::ChannelScaleBackward<bf16>& p) { return channel_scale_backward(p); }

Status run(const ops::Add<float>& p) { return add(p.out, p.a, p.b, p.n); }
Status run(const ops::Add<bf16>& p) { return add(p.out, p.a, p.b, p.n); }

Status run(const ops::Accumulate<float>& p) { return add(p.y, p.y, p.x, p.n); }
Status run(const ops::Accumulate<bf16>& p) { return add(p.y, p.y, p.x, p.n); }

namespace {
// The seed from the step values, when given, as a device pointer the kernel reads (step_values.h).
const double* seed_from(const ops::DropoutDims& d) { return d.seed_at >= 0 ? d.values.table + d.seed_at : nullptr; }
}  // namespace

Status run(const ops::DropoutForward<float>& p) {
  return dropout(p.out, p.x, p.d.n, p.d.p, p.d.seed, p.d.offset, seed_from(p.d));
}
Status run(const ops::DropoutForward<bf16>& p) {
  return dropout(p.out, p.x, p.d.n, p.d.p, p.d.seed, p.d.offset, seed_from(p.d));
}

Status run(const ops::DropoutBackward<float>& p) {
  return dropout(p.dx, p.dout, p.d.n, p.d.p, p.d.seed, p.d.offset, seed_from(p.d));
}
Status run(const ops::DropoutBackward<bf16>& p) {
  return dropout(p.dx, p.dout, p.d.n, p.d.p, p.d.seed, p.d.offset, seed_from(p.d));
}

Status run(const ops::Zero<float>& p) {
  NF_CHECK(p.n >= 0, "zero", "n must be non-negative");
  if (p.n == 0) return Status::Ok();
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  NF_CUDA_TRY("zero", cudaMemsetAsync(p.x, 0, sizeof(float) * size_t(p.n), s));
  return Status::Ok();
}

template <class S>
Status copy_rows_op(const ops::CopyRows<S>& p) {
  return copy_rows(p.dst + p.dst_offset, p.dst_stride, p.src + p.src_offset, p.src_stride, p.rows, p.cols);
}
Status run(const ops::CopyRows<float>& p) { return copy_rows_op(p); }
Status run(const ops::CopyRows<bf16>& p) { return copy_rows_op(p); }

}  // namespace nf::cuda
