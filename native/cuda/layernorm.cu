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
// Dimension key: rows = B*T, D = model width; backward: T threads per row, K chunks of W columns each.
// Parallelism: forward, one warp per row; lane l reads its columns l, l+32, ... (or chunks) once into
// registers (up to D 1,024; further columns are re-read) and the warp reduces with butterfly shuffles
// (two passes over the registers: mean, then the centred variance). Backward: a warp per row
// (D ≤ 1,024; a block of 256 threads per row above, up to 6,144); thread t of a row owns the K chunks
// starting at W (t + kT), reads its columns of x and dout once into registers for both the row sums
// and dx, and keeps its columns' dγ, dβ partial sums in registers over the rows it walks (grid-stride).
// At the end each block forms its per-block row of a scratch buffer (the warps' sums added in warp
// order through shared memory, once per block), and a second kernel adds the blocks' rows into dγ, dβ
// in a fixed order, so results are deterministic (no float atomics).
#include "layernorm.h"

#include <type_traits>

#include "bf16.cuh"
#include "common.cuh"

namespace nf::cuda {

namespace {

constexpr int kRowsPerBlock = 4;         // forward: warps (rows) per block
constexpr int kMaxBackwardBlocks = 256;  // backward: blocks of the dx kernel = rows of partials
constexpr int kParamGradWarps = 8;      // the dγ, dβ sum: warps a block, each over an eighth of the partial rows
constexpr int kParamGradBatch = 16;     // partial rows each thread of the dγ, dβ sum loads at once
constexpr int kCachedColumns = 1024;     // forward: the columns of a row a warp holds in registers

// f(k, c) for each chunk k < K of thread t of a row whose first column, c = W (t + kT), is in the row.
template <int K, int W, int T, class F>
__device__ __forceinline__ void for_chunks(int t, int D, F&& f) {
#pragma unroll
  for (int k = 0; k < K; ++k)
    if ((t + k * T) * W < D) f(k, (t + k * T) * W);
}

// A warp per row; lane l keeps the row's chunks of W columns starting at W (l + k kWarp), k < K, in
// registers, so a row of up to kCachedColumns is read from memory once (the chunks past D are skipped);
// a wider row's further columns are re-read in each pass.
template <class S, int W>
__global__ void __launch_bounds__(kRowsPerBlock * kWarp)
    layernorm_forward_kernel(S* out, S* sum, float* mean, float* rstd, const S* x, const S* residual,
                             const float* gamma, const float* beta, int64_t rows, int D, float eps) {
  constexpr int K = kCachedColumns / (kWarp * W);
  const int lane = int(threadIdx.x) % kWarp;
  const int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  if (row >= rows) return;
  const S* xr = x + row * D;
  const S* rr = residual ? residual + row * D : nullptr;
  S* sr = residual ? sum + row * D : nullptr;
  // The row: x, or the sum x + residual, stored and taken as stored (rounded to S). The lane's first K
  // chunks are read once, every load issued before the first add (and before any store of the sum,
  // which the compiler could not otherwise move a load across), and stay in `cached`; any further chunk
  // is read in the first pass and re-read (from the sum) in the others.
  const auto add_residual = [&](int c, float (&v)[W], const float (&r)[W]) {
    for (int j = 0; j < W; ++j) v[j] = as_stored<S>(v[j] + r[j]);
    store_cols<W>(sr, c, v);
  };
  float cached[K][W];
  if (residual) {
    float r[K][W];
    for_chunks<K, W, kWarp>(lane, D, [&](int k, int c) {
      load_cols<W>(xr, c, cached[k]);
      load_cols<W>(rr, c, r[k]);
    });
    for_chunks<K, W, kWarp>(lane, D, [&](int k, int c) { add_residual(c, cached[k], r[k]); });
  } else {
    for_chunks<K, W, kWarp>(lane, D, [&](int k, int c) { load_cols<W>(xr, c, cached[k]); });
  }
  float s = 0.0f;  // the lane's columns summed in column order, as every pass visits them
  for_chunks<K, W, kWarp>(lane, D, [&](int k, int) {
    for (int j = 0; j < W; ++j) s += cached[k][j];
  });
  for (int c = (lane + K * kWarp) * W; c < D; c += kWarp * W) {
    float v[W];
    load_cols<W>(xr, c, v);
    if (residual) {
      float r[W];
      load_cols<W>(rr, c, r);
      add_residual(c, v, r);
    }
    for (int j = 0; j < W; ++j) s += v[j];
  }
  if (residual) xr = sr;  // each lane re-reads only the columns it wrote, so no barrier is needed
  const float m = warp_sum(s) / float(D);
  float q = 0.0f;
  const auto centred = [&](const float (&v)[W]) {
    for (int j = 0; j < W; ++j) q = fmaf(v[j] - m, v[j] - m, q);
  };
  for_chunks<K, W, kWarp>(lane, D, [&](int k, int) { centred(cached[k]); });
  for (int c = (lane + K * kWarp) * W; c < D; c += kWarp * W) {
    float v[W];
    load_cols<W>(xr, c, v);
    centred(v);
  }
  const float rs = rsqrtf(warp_sum(q) / float(D) + eps);
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = rs;
  }
  S* o = out + row * D;
  const auto normalise = [&](int c, const float (&v)[W]) {
    float g[W], bt[W], y[W];
    load_floats<W>(gamma, c, g);
    load_floats<W>(beta, c, bt);
    for (int j = 0; j < W; ++j) y[j] = fmaf((v[j] - m) * rs, g[j], bt[j]);
    store_cols<W>(o, c, y);
  };
  for_chunks<K, W, kWarp>(lane, D, [&](int k, int c) { normalise(c, cached[k]); });
  for (int c = (lane + K * kWarp) * W; c < D; c += kWarp * W) {
    float v[W];
    load_cols<W>(xr, c, v);
    normalise(c, v);
  }
}

// The backward's threads per row: a warp (T = kWarp, D ≤ kMaxWarpRowD) or the whole block (T =
// kBackwardThreads, larger D up to kMaxBackwardD); thread t of a row owns the K chunks of W columns
// starting at W (t + kT), k < K, and keeps them in registers.
constexpr int kBackwardThreads = 256;
constexpr int kMaxWarpRowD = 1024;
constexpr int kMaxBackwardD = 6144;

// The sum of v over the T threads of a row, returned to each of them (a block-wide T: `scratch` holds
// kWarp floats of shared memory).
template <int T>
__device__ __forceinline__ float row_sum(float v, float* scratch) {
  if constexpr (T == kWarp) return warp_sum(v);
  else return block_reduce(v, SumOp{}, 0.0f, scratch);
}

// dx for the rows of this block's row groups of T threads (grid-stride), and the block's dγ | dβ
// partial sums in partial[blockIdx.x * 2D ...]. Each thread reads its columns of a row once into
// registers (xhat and dout γ replace x and dout there for the dx pass) and sums its columns' dγ, dβ
// over the rows it walks in registers too; at the end a warp-per-row block adds its warps' sums in
// warp order through dynamic shared memory ([warps][2][D] floats), a block-per-row one writes them
// directly (its dynamic shared memory: the kWarp floats of the row sums' block_reduce).
template <class S, int W, int K, int T>
__global__ void __launch_bounds__(kBackwardThreads)
    layernorm_backward_kernel(S* dx, float* partial, const S* dout, const S* dadd, const S* x, const float* mean,
                              const float* rstd, const float* gamma, int64_t rows, int D) {
  NF_DYNAMIC_SHARED(float, smem);
  const int t = int(threadIdx.x) % T, group = int(threadIdx.x) / T, groups = int(blockDim.x) / T;
  const float inv_d = 1.0f / float(D);
  float pg[K][W] = {}, pb[K][W] = {};  // this thread's dγ, dβ partials
  float xh[K][W], gg[K][W];             // a row's x, then xhat; its dout, then dout γ
  for (int64_t row = int64_t(blockIdx.x) * groups + group; row < rows; row += int64_t(gridDim.x) * groups) {
    const S* xr = x + row * D;
    const S* g = dout + row * D;
    for_chunks<K, W, T>(t, D, [&](int k, int c) {
      load_cols<W>(xr, c, xh[k]);
      load_cols<W>(g, c, gg[k]);
    });
    const float m = mean[row], rs = rstd[row];
    float a1 = 0.0f, a2 = 0.0f;  // Σ dout γ, Σ dout γ xhat
    for_chunks<K, W, T>(t, D, [&](int k, int c) {
      float gv[W];  // (a block per row, T > kWarp, reads γ one by one: 8 more live registers spilled it)
      if constexpr (T == kWarp) load_floats<W>(gamma, c, gv);
      else for (int j = 0; j < W; ++j) gv[j] = gamma[c + j];
#pragma unroll
      for (int j = 0; j < W; ++j) {
        const float h = (xh[k][j] - m) * rs, go = gg[k][j], gm = go * gv[j];
        a1 += gm;
        a2 = fmaf(gm, h, a2);
        pg[k][j] = fmaf(go, h, pg[k][j]);
        pb[k][j] += go;
        xh[k][j] = h;
        gg[k][j] = gm;
      }
    });
    a1 = row_sum<T>(a1, smem) * inv_d;
    a2 = row_sum<T>(a2, smem) * inv_d;
    S* o = dx + row * D;
    const S* ad = dadd ? dadd + row * D : nullptr;
    // A plain loop over the chunks: as a for_chunks lambda nvcc 13 gives this pass 8 to 75 more
    // registers in the W = 1 kernels.
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int c = (t + k * T) * W;
      if (c < D) {
        float av[W];
        if (ad) load_cols<W>(ad, c, av);
#pragma unroll
        for (int j = 0; j < W; ++j) {
          const float v = rs * (gg[k][j] - a1 - xh[k][j] * a2);
          xh[k][j] = ad ? v + av[j] : v;
        }
        store_cols<W>(o, c, xh[k]);
      }
    }
  }
  float* out = partial + int64_t(blockIdx.x) * 2 * D;
  float* mine = T == kWarp ? smem + group * 2 * D : out;
  for_chunks<K, W, T>(t, D, [&](int k, int c) {
#pragma unroll
    for (int j = 0; j < W; ++j) {
      mine[c + j] = pg[k][j];
      mine[D + c + j] = pb[k][j];
    }
  });
  if constexpr (T == kWarp) {
    __syncthreads();
    for (int i = int(threadIdx.x); i < 2 * D; i += int(blockDim.x)) {
      float s = 0.0f;
      for (int w = 0; w < groups; ++w) s += smem[w * 2 * D + i];
      out[i] = s;
    }
  }
}

// dγ[i] += Σ_b partial[b][0][i]; dβ[i] += Σ_b partial[b][1][i]: a block per 32 of the 2D columns (a lane
// a column), its kParamGradWarps warps each summing a contiguous share of the partial rows in order
// (loads in batches), then warp 0 adding the warps' sums in warp order: a fixed order, so the same bits
// on every run. (A thread a column over all the rows left 2D threads, 6 blocks at ViT-B's D 768, each
// waiting on 16 rounds of L2 loads.)
__global__ void __launch_bounds__(kParamGradWarps * kWarp)
    layernorm_param_grad_kernel(float* dgamma, float* dbeta, const float* partial, int blocks, int D) {
  __shared__ float sums[kParamGradWarps][kWarp];
  const int lane = int(threadIdx.x) % kWarp, warp = int(threadIdx.x) / kWarp;
  const int i = int(blockIdx.x) * kWarp + lane;
  const int share = (blocks + kParamGradWarps - 1) / kParamGradWarps, first = warp * share;
  const int end = first + share < blocks ? first + share : blocks;
  float s = 0.0f;
  if (i < 2 * D) {
    const float* p = partial + i;
    int b = first;
    for (; b + kParamGradBatch <= end; b += kParamGradBatch) {  // a batch of loads in flight, added in order
      float v[kParamGradBatch];
#pragma unroll
      for (int j = 0; j < kParamGradBatch; ++j) v[j] = p[int64_t(b + j) * 2 * D];
#pragma unroll
      for (int j = 0; j < kParamGradBatch; ++j) s += v[j];
    }
    for (; b < end; ++b) s += p[int64_t(b) * 2 * D];
  }
  sums[warp][lane] = s;
  __syncthreads();
  if (warp > 0 || i >= 2 * D) return;
  float t = 0.0f;
  for (int w = 0; w < kParamGradWarps; ++w) t += sums[w][lane];
  if (i < D) dgamma[i] += t;
  else dbeta[i - D] += t;
}

template <class P>
Status check_dims(const char* op, const P& p) {
  NF_TRY(ops::layernorm_check(op, p));  // the checks every backend shares
  NF_CHECK(p.D <= (int64_t(1) << 30) / kWarp, op, "D is too large");
  return Status::Ok();
}

// Warps (rows) per warp-per-row backward block: as many as fit their [2][D] partials in 48 KiB of
// shared memory (8 up to D 768, 6 at 1,024).
int backward_warps(int64_t D) {
  const int64_t fit = int64_t(kDefaultSharedLimit) / (2 * D * int64_t(sizeof(float)));
  return fit >= 8 ? 8 : int(fit);
}

// Whether the kernels take 16-byte vectors (W = kPack<S>): bf16 rows of a multiple of 8 values from
// aligned arrays (γ and β too: their 8 floats beside a chunk come as two vectors, load_floats).
// float keeps one column per step (W = 1: the order of the sums, hence every result, is what it
// always was).
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
  const bool vec = vectors<S>(p.D, p.out, p.sum, p.x, p.residual, p.gamma, p.beta);
  const auto kernel = vec ? layernorm_forward_kernel<S, kVectorColumns<S>> : layernorm_forward_kernel<S, 1>;
  NF_CUDA_TRY(op, launch(kernel, grid, block, 0, s, p.out, p.sum, p.mean, p.rstd, p.x, p.residual, p.gamma, p.beta,
                         p.rows, int(p.D), float(p.eps)));
  return Status::Ok();
}

template <class S>
using BackwardKernel = void (*)(S*, float*, const S*, const S*, const S*, const float*, const float*, const float*,
                                int64_t, int);

// The backward kernel for D with W columns per chunk: a warp per row for D ≤ kMaxWarpRowD, its K from
// the narrowest of the widths Cols, More... that holds D (those narrower than one chunk per lane,
// 32 W, are skipped), else a block per row with the K that reaches kMaxBackwardD.
template <class S, int W, int Cols, int... More>
BackwardKernel<S> backward_kernel(int D) {
  if constexpr (Cols < kWarp * W) {
    return backward_kernel<S, W, More...>(D);
  } else if constexpr (sizeof...(More) == 0) {
    static_assert(Cols == kMaxWarpRowD && kMaxBackwardD % (kBackwardThreads * W) == 0);
    return D <= Cols ? layernorm_backward_kernel<S, W, Cols / (kWarp * W), kWarp>
                     : layernorm_backward_kernel<S, W, kMaxBackwardD / (kBackwardThreads * W), kBackwardThreads>;
  } else {
    return D <= Cols ? layernorm_backward_kernel<S, W, Cols / (kWarp * W), kWarp> : backward_kernel<S, W, More...>(D);
  }
}
template <class S, int W>
BackwardKernel<S> backward_kernel(int D) {
  return backward_kernel<S, W, 128, 256, 512, 768, kMaxWarpRowD>(D);
}

template <class S>
Status backward(const ops::LayerNormBackward<S>& p) {
  const char* op = "layernorm_backward";
  NF_TRY(check_dims(op, p));
  NF_CHECK(p.D <= kMaxBackwardD, op, "D is too large for the CUDA kernel (at most 6144)");
  if (p.rows == 0) return Status::Ok();
  const int D = int(p.D);
  // A warp per row: `warps` rows per block, their partials in shared memory; a block per row: the
  // row sums' kWarp floats.
  const bool warp_rows = D <= kMaxWarpRowD;
  const int per_block = warp_rows ? backward_warps(D) : 1;
  const int blocks = int(ceil_div(p.rows, per_block) < kMaxBackwardBlocks ? ceil_div(p.rows, per_block)
                                                                          : kMaxBackwardBlocks);
  void* partial = nullptr;
  NF_TRY(workspace(0, sizeof(float) * size_t(blocks) * 2 * size_t(D), &partial));
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  const bool vec = vectors<S>(p.D, p.dx, p.dout, p.dadd, p.x, p.gamma);
  const auto kernel = vec ? backward_kernel<S, kVectorColumns<S>>(D) : backward_kernel<S, 1>(D);
  const unsigned threads = unsigned(warp_rows ? per_block * kWarp : kBackwardThreads);
  const size_t smem = sizeof(float) * (warp_rows ? size_t(per_block) * 2 * size_t(D) : size_t(kWarp));
  NF_CUDA_TRY(op, launch(kernel, dim3(unsigned(blocks)), dim3(threads), smem, s, p.dx, static_cast<float*>(partial),
                         p.dout, p.dadd, p.x, p.mean, p.rstd, p.gamma, p.rows, D));
  NF_CUDA_TRY(op, launch(layernorm_param_grad_kernel, dim3(unsigned(ceil_div(2 * D, kWarp))),
                         dim3(kParamGradWarps * kWarp), 0, s, p.dgamma, p.dbeta, static_cast<const float*>(partial),
                         blocks, D));
  return Status::Ok();
}

}  // namespace

Status run(const ops::LayerNormForward<float>& p) { return forward(p); }
Status run(const ops::LayerNormForward<bf16>& p) { return forward(p); }
Status run(const ops::LayerNormBackward<float>& p) { return backward(p); }
Status run(const ops::LayerNormBackward<bf16>& p) { return backward(p); }

}  // namespace nf::cuda
