// Linear layer on the GPU, forward and backward, and the bias gradient (column sums).
// Math: y = act(x Wᵀ + b); backward dx = dy W, dW += dyᵀ x, db += Σ_rows dy (the column sums also
//   give a per-column scale's gradient, Σ_rows dy ∘ x).
// Layout: x [rows, in], W [out, in] (PyTorch's), b [out], y and dy [rows, out].
// Dimension key: rows = B*T, in/out = feature widths.
// Storage: x, W, y, dy, dx are S (float; or bf16 under precision 'bf16', W then the bf16 copy of the
// fp32 master weight), b, dW, db float (gemm.h GemmCallOf<S, S> and <S, float>).
// The products are calls of the GEMM dispatch (gemm.h: cuBLASLt or the backend's kernel); the
// weight-gradient product carries the bias gradient (cuBLASLt's BGRADB epilogue, or the column sums
// below). The column sums run in two deterministic stages: blocks of 32 x 8
// threads each sum a 32-column stripe over a chunk of rows (thread row ty takes every 8th row, then
// the block adds its 8 partials in shared memory), writing one row of partials per chunk; a second
// kernel adds the chunks' rows in order into db. With a single chunk the first kernel adds to db.
#include "linear.h"

#include "bf16.cuh"
#include "common.cuh"

namespace nf::cuda {

namespace {

constexpr int kCols = 32, kRowThreads = 8;
constexpr int kRowsPerChunk = 512;
constexpr int kMaxChunks = 64;

template <class S>
__global__ void __launch_bounds__(kCols * kRowThreads)
    column_sum_kernel(float* out, const S* dy, const S* x, int64_t rows, int n, int64_t chunk, bool accumulate) {
  NF_SHARED(float[kRowThreads][kCols + 1], part);
  const int tx = int(threadIdx.x), ty = int(threadIdx.y);
  const int col = int(blockIdx.x) * kCols + tx;
  const int64_t r0 = int64_t(blockIdx.y) * chunk, r1 = r0 + chunk < rows ? r0 + chunk : rows;
  float s = 0.0f;
  if (col < n)
    for (int64_t r = r0 + ty; r < r1; r += kRowThreads)
      s = x ? fmaf(load(dy + r * n + col), load(x + r * n + col), s) : s + load(dy + r * n + col);
  part[ty][tx] = s;
  __syncthreads();
  if (ty != 0 || col >= n) return;
  for (int k = 1; k < kRowThreads; ++k) s += part[k][tx];
  if (accumulate) out[col] += s;
  else out[int64_t(blockIdx.y) * n + col] = s;
}

__global__ void add_chunks_kernel(float* db, const float* partial, int chunks, int n) {
  const int col = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (col >= n) return;
  float s = 0.0f;
  for (int c = 0; c < chunks; ++c) s += partial[int64_t(c) * n + col];
  db[col] += s;
}

template <class S>
Status column_sums(float* db, const S* dy, int64_t rows, int64_t n, const S* x) {
  NF_CHECK(rows >= 0 && n >= 0 && n < (int64_t(1) << 31), "bias_grad", "bad dims");
  if (rows == 0 || n == 0) return Status::Ok();
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  int64_t chunks = ceil_div(rows, kRowsPerChunk);
  if (chunks > kMaxChunks) chunks = kMaxChunks;
  const int64_t chunk = ceil_div(rows, chunks);
  chunks = ceil_div(rows, chunk);
  const dim3 grid(unsigned(ceil_div(n, kCols)), unsigned(chunks)), block(kCols, kRowThreads);
  if (chunks == 1) {
    NF_CUDA_TRY("bias_grad", launch(column_sum_kernel<S>, grid, block, 0, s, db, dy, x, rows, int(n), chunk, true));
    return Status::Ok();
  }
  void* partial = nullptr;
  NF_TRY(workspace(1, sizeof(float) * size_t(chunks * n), &partial));
  NF_CUDA_TRY("bias_grad", launch(column_sum_kernel<S>, grid, block, 0, s, static_cast<float*>(partial), dy, x,
                                  rows, int(n), chunk, false));
  NF_CUDA_TRY("bias_grad", launch(add_chunks_kernel, dim3(unsigned(ceil_div(n, 256))), dim3(256), 0, s, db,
                                  static_cast<const float*>(partial), int(chunks), int(n)));
  return Status::Ok();
}

template <class S>
Status forward(S* y, S* preact, const S* x, const S* W, const float* b, LinearDims d, Act act, Compute mode,
               const S* b_rounded, const S* residual) {
  NF_TRY(ops::linear_check("linear_forward", d));
  NF_CHECK(!residual || (act == Act::none && residual != y), "linear_forward",
           "a residual input takes act 'none' and is not y itself");
  if (d.rows == 0) return Status::Ok();
  GemmDims g;
  g.M = d.rows, g.N = d.out_features, g.K = d.in_features, g.transB = true, g.act = act;
  if (residual) g.beta = 1.0f;
  return cuda::gemm<S, S>(y, preact, x, W, b, g, mode, b_rounded, residual);
}

template <class S>
Status backward_input(S* dx, const S* dy, const S* W, LinearDims d, const S* preact, Act act, Compute mode) {
  NF_TRY(ops::linear_check("linear_backward", d));
  if (d.rows == 0) return Status::Ok();
  GemmCallOf<S, S> c;  // dx [rows, in] = dy [rows, out] W [out, in] (∘ act'(preact))
  c.d.M = d.rows, c.d.N = d.in_features, c.d.K = d.out_features;
  c.C = dx, c.A = dy, c.B = W, c.mode = mode;
  if (act != Act::none) c.dact_input = preact, c.dact = act;
  NF_CHECK(act == Act::none || preact, "linear_backward", "an activation's backward needs its input (preact)");
  return cuda::gemm(c);
}

template <class S>
Status backward_weight(float* dW, float* db, const S* dy, const S* x, LinearDims d, Compute mode) {
  NF_TRY(ops::linear_check("linear_backward", d));
  if (d.rows == 0) return Status::Ok();
  GemmCallOf<S, float> c;  // dW [out, in] += dyᵀ x, db [out] += Σ_rows dy: Σ_k of op(A) = dyᵀ
  c.d.M = d.out_features, c.d.N = d.in_features, c.d.K = d.rows, c.d.transA = true, c.d.beta = 1.0f;
  c.C = dW, c.A = dy, c.B = x, c.dbias = db, c.mode = mode;
  return cuda::gemm(c);
}

template <class S>
Status backward(S* dx, float* dW, float* db, const S* dy, const S* x, const S* W, LinearDims d, Compute mode) {
  NF_TRY(ops::linear_check("linear_backward", d));
  if (d.rows == 0) return Status::Ok();
  if (dx) NF_TRY(backward_input<S>(dx, dy, W, d, nullptr, Act::none, mode));
  return backward_weight(dW, db, dy, x, d, mode);
}

}  // namespace

Status bias_grad(float* db, const float* dy, int64_t rows, int64_t n, const float* x) {
  return column_sums(db, dy, rows, n, x);
}
Status bias_grad(float* db, const bf16* dy, int64_t rows, int64_t n, const bf16* x) {
  return column_sums(db, dy, rows, n, x);
}
Status linear_forward(float* y, float* preact, const float* x, const float* W, const float* b, LinearDims d, Act act,
                      Compute mode, const float* b_rounded, const float* residual) {
  return forward(y, preact, x, W, b, d, act, mode, b_rounded, residual);
}
Status linear_forward(bf16* y, bf16* preact, const bf16* x, const bf16* W, const float* b, LinearDims d, Act act,
                      Compute mode, const bf16* b_rounded, const bf16* residual) {
  return forward(y, preact, x, W, b, d, act, mode, b_rounded, residual);
}
Status linear_backward(float* dx, float* dW, float* db, const float* dy, const float* x, const float* W, LinearDims d,
                       Compute mode) {
  return backward(dx, dW, db, dy, x, W, d, mode);
}
Status linear_backward(bf16* dx, float* dW, float* db, const bf16* dy, const bf16* x, const bf16* W, LinearDims d,
                       Compute mode) {
  return backward(dx, dW, db, dy, x, W, d, mode);
}
Status linear_backward_input(float* dx, const float* dy, const float* W, LinearDims d, const float* preact, Act act,
                             Compute mode) {
  return backward_input(dx, dy, W, d, preact, act, mode);
}
Status linear_backward_input(bf16* dx, const bf16* dy, const bf16* W, LinearDims d, const bf16* preact, Act act,
                             Compute mode) {
  return backward_input(dx, dy, W, d, preact, act, mode);
}
Status linear_backward_weight(float* dW, float* db, const float* dy, const float* x, LinearDims d, Compute mode) {
  return backward_weight(dW, db, dy, x, d, mode);
}
Status linear_backward_weight(float* dW, float* db, const bf16* dy, const bf16* x, LinearDims d, Compute mode) {
  return backward_weight(dW, db, dy, x, d, mode);
}

Status run(const ops::LinearForward<float>& p) {
  return linear_forward(p.y, p.preact, p.x, p.W, p.b, p.d, p.act, compute_of(p.precision), p.b_rounded);
}
Status run(const ops::LinearForward<bf16>& p) {
  return linear_forward(p.y, p.preact, p.x, p.W, p.b, p.d, p.act, compute_of(p.precision), p.b_rounded);
}

Status run(const ops::LinearBackward<float>& p) {
  return linear_backward(p.dx, p.dW, p.db, p.dy, p.x, p.W, p.d, compute_of(p.precision));
}
Status run(const ops::LinearBackward<bf16>& p) {
  return linear_backward(p.dx, p.dW, p.db, p.dy, p.x, p.W, p.d, compute_of(p.precision));
}

}  // namespace nf::cuda
