// GEMM on the GPU: C = act(alpha op(A) op(B) + beta C + bias), strided-batched (see gemm.h).
// Layout: row-major A, B, C with row strides lda/ldb/ldc; op(A) [M, K], op(B) [K, N], C [M, N].
// Dimension key: M rows of C, N columns of C, K the reduced dimension; z = batch index.
// Structure (the classic register-blocked SGEMM): a block computes a BM x BN tile of C with
// (BM/TM) x (BN/TN) threads, each owning TM x TN accumulators at rows ty + i·BM/TM and columns
// tx + j·BN/TN (so a warp's shared-memory reads of B and its stores of C are consecutive). K is
// walked in BK-deep slices: A's slice is stored transposed, As[k][m], and B's as Bs[k][n], both
// padded by 4 floats per row; the slices are double-buffered in shared memory and the next one is
// fetched into registers while the current one is multiplied, so there is one barrier per slice.
// Edges (M, N, K not multiples of the tile) load zeros. Two tile shapes: 128x128x8 with 8x8 per
// thread when the problem has at least a wave of such tiles for an H100 (132 SMs), else 64x64x16
// with 4x4. The epilogue applies alpha, beta·C, the bias, writes preact, then the activation.
#include "gemm.h"

#include <climits>

#include "activation.cuh"
#include "common.cuh"

namespace nf::cuda {

namespace {

constexpr int kPad = 4;
constexpr int64_t kWaveTiles = 132;  // SMs of an H100 SXM

struct GemmArgs {
  float* C;
  float* preact;
  const float* A;
  const float* B;
  const float* bias;
  int M, N, K;
  bool transA, transB;
  int64_t lda, ldb, ldc, strideA, strideB, strideC;
  float alpha, beta;
  Act act;
};

template <int BM, int BN, int BK, int TM, int TN>
struct Tile {
  static constexpr int kThreadsM = BM / TM, kThreadsN = BN / TN, kThreads = kThreadsM * kThreadsN;
  static constexpr int kLoadA = BM * BK / kThreads, kLoadB = BK * BN / kThreads;  // per thread per slice
  // Blocks per SM the registers must allow: 8x8 accumulators need ~170 registers, so one 256-thread
  // block (capping at 128 would spill); 4x4 fits three.
  static constexpr int kMinBlocks = TM * TN >= 64 ? 1 : 3;
  static_assert(BM * BK % kThreads == 0 && BK * BN % kThreads == 0, "slices split evenly over threads");
};

template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__(Tile<BM, BN, BK, TM, TN>::kThreads, Tile<BM, BN, BK, TM, TN>::kMinBlocks)
    gemm_kernel(GemmArgs g) {
  using T = Tile<BM, BN, BK, TM, TN>;
  NF_SHARED(float[2][BK][BM + kPad], As);
  NF_SHARED(float[2][BK][BN + kPad], Bs);
  const int tid = int(threadIdx.x), tx = tid % T::kThreadsN, ty = tid / T::kThreadsN;
  const int m0 = int(blockIdx.y) * BM, n0 = int(blockIdx.x) * BN;
  const int64_t z = blockIdx.z;
  const float* A = g.A + z * g.strideA;
  const float* B = g.B + z * g.strideB;

  // Slice element `idx` of this thread: A's (m, k) and B's (k, n), ordered so consecutive threads
  // read consecutive addresses of the stored matrix.
  auto a_coord = [&](int idx, int* m, int* k) {
    if (g.transA) *k = idx / BM, *m = idx % BM;
    else *m = idx / BK, *k = idx % BK;
  };
  auto b_coord = [&](int idx, int* k, int* n) {
    if (g.transB) *n = idx / BK, *k = idx % BK;
    else *k = idx / BN, *n = idx % BN;
  };
  float ra[T::kLoadA], rb[T::kLoadB];
  auto fetch = [&](int k0) {
#pragma unroll
    for (int i = 0; i < T::kLoadA; ++i) {
      int m, k;
      a_coord(tid + i * T::kThreads, &m, &k);
      const int gm = m0 + m, gk = k0 + k;
      ra[i] = gm < g.M && gk < g.K ? A[g.transA ? gk * g.lda + gm : gm * g.lda + gk] : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < T::kLoadB; ++i) {
      int k, n;
      b_coord(tid + i * T::kThreads, &k, &n);
      const int gk = k0 + k, gn = n0 + n;
      rb[i] = gk < g.K && gn < g.N ? B[g.transB ? gn * g.ldb + gk : gk * g.ldb + gn] : 0.0f;
    }
  };
  auto stash = [&](int buf) {
#pragma unroll
    for (int i = 0; i < T::kLoadA; ++i) {
      int m, k;
      a_coord(tid + i * T::kThreads, &m, &k);
      As[buf][k][m] = ra[i];
    }
#pragma unroll
    for (int i = 0; i < T::kLoadB; ++i) {
      int k, n;
      b_coord(tid + i * T::kThreads, &k, &n);
      Bs[buf][k][n] = rb[i];
    }
  };

  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

  const int slices = (g.K + BK - 1) / BK;
  if (slices > 0) {
    fetch(0);
    stash(0);
  }
  __syncthreads();
  for (int s = 0; s < slices; ++s) {
    const int cur = s & 1;
    if (s + 1 < slices) fetch((s + 1) * BK);
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      float a[TM], b[TN];
#pragma unroll
      for (int i = 0; i < TM; ++i) a[i] = As[cur][k][ty + i * T::kThreadsM];
#pragma unroll
      for (int j = 0; j < TN; ++j) b[j] = Bs[cur][k][tx + j * T::kThreadsN];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    if (s + 1 < slices) stash(cur ^ 1);  // the other buffer: everyone finished reading it before the last barrier
    __syncthreads();
  }

  float* C = g.C + z * g.strideC;
  float* P = g.preact ? g.preact + z * g.strideC : nullptr;
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int row = m0 + ty + i * T::kThreadsM;
    if (row >= g.M) continue;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int col = n0 + tx + j * T::kThreadsN;
      if (col >= g.N) continue;
      const int64_t at = row * g.ldc + col;
      float v = g.alpha * acc[i][j];
      if (g.beta != 0.0f) v = fmaf(g.beta, C[at], v);
      if (g.bias) v += g.bias[col];
      if (P) P[at] = v;
      C[at] = act_forward(v, g.act);
    }
  }
}

template <int BM, int BN, int BK, int TM, int TN>
cudaError_t launch_gemm(const GemmArgs& g, int64_t batch, cudaStream_t s) {
  const dim3 grid(unsigned(ceil_div(g.N, BN)), unsigned(ceil_div(g.M, BM)), unsigned(batch));
  return launch(gemm_kernel<BM, BN, BK, TM, TN>, grid, dim3(Tile<BM, BN, BK, TM, TN>::kThreads), 0, s, g);
}

}  // namespace

Status gemm_check(GemmDims* d) {
  NF_CHECK(d->M >= 0 && d->N >= 0 && d->K >= 0, "gemm", "M, N and K must be non-negative");
  NF_CHECK(d->M < INT_MAX && d->N < INT_MAX && d->K < INT_MAX, "gemm", "M, N and K must be below 2^31");
  NF_CHECK(d->batch >= 1 && d->batch <= 65535, "gemm", "batch must be in [1, 65535]");
  NF_CHECK(d->M <= 65535LL * 64, "gemm", "M is too large for the CUDA grid");
  if (d->lda == 0) d->lda = d->transA ? d->M : d->K;
  if (d->ldb == 0) d->ldb = d->transB ? d->K : d->N;
  if (d->ldc == 0) d->ldc = d->N;
  NF_CHECK(d->lda >= (d->transA ? d->M : d->K), "gemm", "lda is smaller than a row of A");
  NF_CHECK(d->ldb >= (d->transB ? d->K : d->N), "gemm", "ldb is smaller than a row of B");
  NF_CHECK(d->ldc >= d->N, "gemm", "ldc is smaller than a row of C");
  return Status::Ok();
}

Status gemm(float* C, float* preact, const float* A, const float* B, const float* bias, GemmDims d) {
  NF_TRY(gemm_check(&d));
  if (d.M == 0 || d.N == 0) return Status::Ok();
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  const GemmArgs g{C,     preact, A,     B,     bias,      int(d.M),  int(d.N),  int(d.K), d.transA,
                   d.transB, d.lda, d.ldb, d.ldc, d.strideA, d.strideB, d.strideC, d.alpha, d.beta, d.act};
  const bool large = ceil_div(d.M, 128) * ceil_div(d.N, 128) * d.batch >= kWaveTiles;
  NF_CUDA_TRY("gemm", large ? launch_gemm<128, 128, 8, 8, 8>(g, d.batch, s) : launch_gemm<64, 64, 16, 4, 4>(g, d.batch, s));
  return Status::Ok();
}

}  // namespace nf::cuda
