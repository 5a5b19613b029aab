// LayerNorm, forward and backward, on the GPU.
// Math (per row of D values): mean = Σx/D, var = Σ(x-mean)²/D, rstd = 1/sqrt(var + eps),
//   xhat = (x - mean) rstd, out = xhat γ + β.
//   Backward: g = dout γ; dx = rstd (g - mean(g) - xhat mean(g xhat)); dγ += Σ dout xhat; dβ += Σ dout.
// Layout: x, out, dout, dx are [rows, D] row-major; γ, β [D]; mean, rstd [rows].
// Storage: x, residual, sum, out, dout, dadd, dx are S (float, or bf16 under precision 'bf16',
// bf16.cuh); γ, β, their gradients, mean and rstd float; all arithmetic float. With a residual the
// statistics are those of the sum as stored (rounded to S), so backward, which reads it, agrees.
// bf16 rows of a multiple of 8 values move as 16-byte vectors: lane l then owns the chunks of 8
// columns starting at 8l, 8(l + 32), ... instead of the columns l, l + 32, ... (W in the kernels).
// Dimension key: rows = B*T, D = model width.
// Parallelism: one warp per row; lane l handles columns l, l+32, ... and the warp reduces with
// butterfly shuffles (two passes: mean, then the centred variance). Backward: each warp walks rows
// (grid-stride) and accumulates its dγ, dβ partials in its own slice of shared memory; each block
// then sums its warps' slices into a per-block row of a scratch buffer, and a second kernel adds the
// blocks' rows into dγ, dβ in a fixed order, so results are deterministic (no float atomics).
#include "layernorm.h"

#include <type_traits>

#include "bf16.cuh"
#include "common.cuh"

namespace nf::cuda {

namespace {

constexpr int kRowsPerBlock = 4;         // forward: warps (rows) per block
constexpr int kMaxBackwardBlocks = 256;  // backward: blocks of the dx kernel = rows of partials
constexpr int kReduceThreads = 256;

template <class S, int W>
__global__ void __launch_bounds__(kRowsPerBlock * kWarp)
    layernorm_forward_kernel(S* out, S* sum, float* mean, float* rstd, const S* x, const S* residual,
                             const float* gamma, const float* beta, int64_t rows, int D, float eps) {
  const int lane = int(threadIdx.x) % kWarp;
  const int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  if (row >= rows) return;
  const S* xr = x + row * D;
  float v[W];
  if (residual) {  // each lane re-reads only the columns it wrote, so no barrier is needed
    S* sr = sum + row * D;
    for (int c = lane * W; c < D; c += kWarp * W) {
      float r[W];
      load_cols<W>(xr, c, v);
      load_cols<W>(residual + row * D, c, r);
      for (int j = 0; j < W; ++j) v[j] += r[j];
      store_cols<W>(sr, c, v);
    }
    xr = sr;
  }
  float s = 0.0f;
  for (int c = lane * W; c < D; c += kWarp * W) {
    load_cols<W>(xr, c, v);
    for (int j = 0; j < W; ++j) s += v[j];
  }
  const float m = warp_sum(s) / float(D);
  float q = 0.0f;
  for (int c = lane * W; c < D; c += kWarp * W) {
    load_cols<W>(xr, c, v);
    for (int j = 0; j < W; ++j) q = fmaf(v[j] - m, v[j] - m, q);
  }
  const float rs = rsqrtf(warp_sum(q) / float(D) + eps);
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = rs;
  }
  S* o = out + row * D;
  for (int c = lane * W; c < D; c += kWarp * W) {
    load_cols<W>(xr, c, v);
    for (int j = 0; j < W; ++j) v[j] = fmaf((v[j] - m) * rs, gamma[c + j], beta[c + j]);
    store_cols<W>(o, c, v);
  }
}

// dx for the rows of this block's warps (grid-stride), and the block's dγ | dβ partial sums in
// partial[blockIdx.x * 2D ...]. Dynamic shared memory: [warps][2][D] floats.
template <class S, int W>
__global__ void layernorm_backward_kernel(S* dx, float* partial, const S* dout, const S* dadd, const S* x,
                                          const float* mean, const float* rstd, const float* gamma, int64_t rows,
                                          int D) {
  NF_DYNAMIC_SHARED(float, smem);
  const int lane = int(threadIdx.x) % kWarp, warp = int(threadIdx.x) / kWarp, warps = int(blockDim.x) / kWarp;
  float* pg = smem + warp * 2 * D;  // this warp's dγ partials, then its dβ partials
  float* pb = pg + D;
  for (int c = lane * W; c < D; c += kWarp * W)
    for (int j = 0; j < W; ++j) pg[c + j] = pb[c + j] = 0.0f;
  const float inv_d = 1.0f / float(D);
  float xv[W], gv[W];
  for (int64_t row = int64_t(blockIdx.x) * warps + warp; row < rows; row += int64_t(gridDim.x) * warps) {
    const S* xr = x + row * D;
    const S* g = dout + row * D;
    const float m = mean[row], rs = rstd[row];
    float a1 = 0.0f, a2 = 0.0f;  // Σ dout γ, Σ dout γ xhat
    for (int c = lane * W; c < D; c += kWarp * W) {
      load_cols<W>(xr, c, xv);
      load_cols<W>(g, c, gv);
      for (int j = 0; j < W; ++j) {
        const float xh = (xv[j] - m) * rs, go = gv[j], gg = go * gamma[c + j];
        a1 += gg;
        a2 = fmaf(gg, xh, a2);
        pg[c + j] = fmaf(go, xh, pg[c + j]);
        pb[c + j] += go;
      }
    }
    a1 = warp_sum(a1) * inv_d;
    a2 = warp_sum(a2) * inv_d;
    S* o = dx + row * D;
    const S* ad = dadd ? dadd + row * D : nullptr;
    for (int c = lane * W; c < D; c += kWarp * W) {
      load_cols<W>(xr, c, xv);
      load_cols<W>(g, c, gv);
      float av[W];
      if (ad) load_cols<W>(ad, c, av);
      for (int j = 0; j < W; ++j) {
        const float xh = (xv[j] - m) * rs;
        const float v = rs * (gv[j] * gamma[c + j] - a1 - xh * a2);
        xv[j] = ad ? v + av[j] : v;
      }
      store_cols<W>(o, c, xv);
    }
  }
  __syncthreads();
  float* out = partial + int64_t(blockIdx.x) * 2 * D;
  for (int i = int(threadIdx.x); i < 2 * D; i += int(blockDim.x)) {
    float s = 0.0f;
    for (int w = 0; w < warps; ++w) s += smem[w * 2 * D + i];
    out[i] = s;
  }
}

// dγ[i] += Σ_b partial[b][0][i]; dβ[i] += Σ_b partial[b][1][i].
__global__ void __launch_bounds__(kReduceThreads)
    layernorm_param_grad_kernel(float* dgamma, float* dbeta, const float* partial, int blocks, int D) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= 2 * D) return;
  float s = 0.0f;
  for (int b = 0; b < blocks; ++b) s += partial[int64_t(b) * 2 * D + i];
  if (i < D) dgamma[i] += s;
  else dbeta[i - D] += s;
}

template <class P>
Status check_dims(const char* op, const P& p) {
  NF_TRY(ops::layernorm_check(op, p));  // the checks every backend shares
  NF_CHECK(p.D <= (int64_t(1) << 30) / kWarp, op, "D is too large");
  return Status::Ok();
}

// Warps per backward block: as many as fit their [2][D] partials in 48 KiB of shared memory.
int backward_warps(int64_t D) {
  const int64_t fit = int64_t(kDefaultSharedLimit) / (2 * D * int64_t(sizeof(float)));
  return fit >= 8 ? 8 : int(fit);
}

// Whether the kernels take 16-byte vectors (W = kPack<S>): bf16 rows of a multiple of 8 values from
// aligned arrays. float keeps one column per step (W = 1: the order of the sums, hence every result,
// is what it always was).
template <class S, class... P>
bool vectors(int64_t D, const P*... arrays) {
  return std::is_same_v<S, bf16> && D % kPack<S> == 0 && aligned16(arrays...);
}
// The columns per step of the vector path (1 for float: no such path is compiled).
template <class S>
constexpr int kVectorColumns = std::is_same_v<S, bf16> ? kPack<S> : 1;

template <class S>
Status forward(const ops::LayerNormForward<S>& p) {
  const char* op = "layernorm_forward";
  NF_TRY(check_dims(op, p));
  NF_CHECK(!p.residual || p.sum, op, "the residual variant needs a `sum` output");
  if (p.rows == 0) return Status::Ok();
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  const dim3 grid(unsigned(ceil_div(p.rows, kRowsPerBlock))), block(kRowsPerBlock * kWarp);
  const auto kernel = vectors<S>(p.D, p.out, p.sum, p.x, p.residual) ? layernorm_forward_kernel<S, kVectorColumns<S>>
                                                                  : layernorm_forward_kernel<S, 1>;
  NF_CUDA_TRY(op, launch(kernel, grid, block, 0, s, p.out, p.sum, p.mean, p.rstd, p.x, p.residual, p.gamma, p.beta,
                         p.rows, int(p.D), float(p.eps)));
  return Status::Ok();
}

template <class S>
Status backward(const ops::LayerNormBackward<S>& p) {
  const char* op = "layernorm_backward";
  NF_TRY(check_dims(op, p));
  const int warps = backward_warps(p.D);
  NF_CHECK(warps >= 1, op, "D is too large for the CUDA kernel (at most 6144)");
  if (p.rows == 0) return Status::Ok();
  const int D = int(p.D);
  const int blocks = int(ceil_div(p.rows, warps) < kMaxBackwardBlocks ? ceil_div(p.rows, warps) : kMaxBackwardBlocks);
  void* partial = nullptr;
  NF_TRY(workspace(0, sizeof(float) * size_t(blocks) * 2 * size_t(D), &partial));
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  const auto kernel = vectors<S>(p.D, p.dx, p.dout, p.dadd, p.x) ? layernorm_backward_kernel<S, kVectorColumns<S>>
                                                              : layernorm_backward_kernel<S, 1>;
  NF_CUDA_TRY(op, launch(kernel, dim3(unsigned(blocks)), dim3(unsigned(warps * kWarp)),
                         sizeof(float) * size_t(warps) * 2 * size_t(D), s, p.dx, static_cast<float*>(partial),
                         p.dout, p.dadd, p.x, p.mean, p.rstd, p.gamma, p.rows, D));
  NF_CUDA_TRY(op, launch(layernorm_param_grad_kernel, dim3(unsigned(ceil_div(2 * D, kReduceThreads))),
                         dim3(kReduceThreads), 0, s, p.dgamma, p.dbeta, static_cast<const float*>(partial), blocks,
                         D));
  return Status::Ok();
}

}  // namespace

Status run(const ops::LayerNormForward<float>& p) { return forward(p); }
Status run(const ops::LayerNormForward<bf16>& p) { return forward(p); }
Status run(const ops::LayerNormBackward<float>& p) { return backward(p); }
Status run(const ops::LayerNormBackward<bf16>& p) { return backward(p); }

}  // namespace nf::cuda
