// GEMM on the GPU: C = act(alpha op(A) op(B) + beta C + bias), strided-batched (see gemm.h): the
// dispatch (at the end of this file) and the backend's own kernel.
// The dispatch, in order: (1) one cuBLASLt product whose epilogue does everything asked (BIAS,
// RELU[_BIAS], GELU[_AUX][_BIAS] for the tanh GELU, DGELU for its backward, BGRADB for a weight
// gradient's bias gradient; activation epilogues only from beta = 0; beta·C may come from another
// array, C_in: a residual added by the product); (2) the product through cuBLASLt (with the bias in
// its epilogue when it can be), then the elementwise kernels of activation.cu / linear.cu for what
// remains (the erf GELU, SiLU, tanh; a ReLU whose input is saved; beta·C with an activation); (3) the
// kernel below (C_in copied into C first), when cuBLASLt is not loaded, offers
// no algorithm, or K = 0, or the elementwise kernels cannot run over C (strided C). cuBLASLt is
// column-major: our row-major C = op(A) op(B) is its Cᵀ = op(B)ᵀ op(A)ᵀ (column_major() below).
// The kernel:
// Layout: row-major A, B, C with row strides lda/ldb/ldc; op(A) [M, K], op(B) [K, N], C [M, N].
// Dimension key: M rows of C, N columns of C, K the reduced dimension; z = batch index.
// Structure (the classic register-blocked SGEMM): a block computes a BM x BN tile of C with
// (BM/TM) x (BN/TN) threads, each owning TM x TN accumulators at rows ty + i·BM/TM and columns
// tx + j·BN/TN (so a warp's shared-memory reads of B and its stores of C are consecutive). K is
// walked in BK-deep slices: A's slice is stored transposed, As[k][m], and B's as Bs[k][n], both
// padded by 4 floats per row; the slices are double-buffered in shared memory and the next one is
// fetched into registers while the current one is multiplied, so there is one barrier per slice.
// Edges (M, N, K not multiples of the tile) load zeros. Two tile shapes: 128x128x8 with 8x8 per
// thread when the problem has at least one such tile per SM of an H100 (132), else 64x64x16 with
// 4x4. The epilogue applies alpha, beta·C, the bias, writes preact, then the activation.
// Storage (gemm.h GemmCallOf): A, B are TA and C, preact TC (float or bf16); the kernel converts A
// and B to float as it fetches them into shared memory, accumulates in float, and rounds to TC in
// the epilogue; split-K partials are float.
// Split-K: when even the small tiles leave most SMs idle and K is long (the weight gradients dW =
// dYᵀX of Linear layers: K = B*T), blockIdx.z also picks one of S slices of K; each block writes its
// raw sums to a scratch [S, batch, M, N] and a second kernel adds the S partials in order and
// applies the epilogue, so the result stays deterministic.
#include "gemm.h"

#include <atomic>
#include <climits>

#include "activation.cuh"
#include "activation.h"
#include "bf16.cuh"
#include "bf16.h"
#include "common.cuh"
#include "cublaslt.h"
#include "cublaslt_api.h"
#include "device.h"
#include "elementwise.h"
#include "linear.h"

namespace nf::cuda {

namespace {

constexpr int kPad = 4;
constexpr int64_t kWaveTiles = 132;  // SMs of an H100 SXM

template <class TA, class TC>
struct GemmArgs {
  float* partial;  // split-K: the raw sums go here, [splits, batch, M, N] (else null)
  int64_t batch;
  int k_chunk;     // K per split (a multiple of every BK; K when not split)
  TC* C;
  TC* preact;
  const TA* A;
  const TA* B;
  const float* bias;
  int M, N, K;
  bool transA, transB;
  int64_t lda, ldb, ldc, strideA, strideB, strideC;
  float alpha, beta;
  Act act;
  bool reduced;  // GELU's Φ from normcdf_reduced: the operands are bf16 (bf16_products below)
};

template <int BM, int BN, int BK, int TM, int TN>
struct Tile {
  static constexpr int kThreadsM = BM / TM, kThreadsN = BN / TN, kThreads = kThreadsM * kThreadsN;
  static constexpr int kLoadA = BM * BK / kThreads, kLoadB = BK * BN / kThreads;  // per thread per slice
  // Blocks per SM the registers must allow: two 256-thread blocks for 8x8 accumulators (128
  // registers), three for 4x4 (85).
  static constexpr int kMinBlocks = TM * TN >= 64 ? 2 : 3;
  static_assert(BM * BK % kThreads == 0 && BK * BN % kThreads == 0, "slices split evenly over threads");
};

template <int BM, int BN, int BK, int TM, int TN, class TA, class TC>
__global__ void __launch_bounds__(Tile<BM, BN, BK, TM, TN>::kThreads, Tile<BM, BN, BK, TM, TN>::kMinBlocks)
    gemm_kernel(GemmArgs<TA, TC> g) {
  using T = Tile<BM, BN, BK, TM, TN>;
  NF_SHARED(float[2][BK][BM + kPad], As);
  NF_SHARED(float[2][BK][BN + kPad], Bs);
  const int tid = int(threadIdx.x), tx = tid % T::kThreadsN, ty = tid / T::kThreadsN;
  const int m0 = int(blockIdx.y) * BM, n0 = int(blockIdx.x) * BN;
  const int64_t z = blockIdx.z % g.batch;
  const int split = int(blockIdx.z / g.batch);
  const int k_begin = split * g.k_chunk, k_end = int64_t(k_begin) + g.k_chunk < g.K ? k_begin + g.k_chunk : g.K;
  const TA* A = g.A + z * g.strideA;
  const TA* B = g.B + z * g.strideB;

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
      ra[i] = gm < g.M && gk < k_end ? load(A + (g.transA ? gk * g.lda + gm : gm * g.lda + gk)) : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < T::kLoadB; ++i) {
      int k, n;
      b_coord(tid + i * T::kThreads, &k, &n);
      const int gk = k0 + k, gn = n0 + n;
      rb[i] = gk < k_end && gn < g.N ? load(B + (g.transB ? gn * g.ldb + gk : gk * g.ldb + gn)) : 0.0f;
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

  const int slices = (k_end - k_begin + BK - 1) / BK;
  if (slices > 0) {
    fetch(k_begin);
    stash(0);
  }
  __syncthreads();
  for (int s = 0; s < slices; ++s) {
    const int cur = s & 1;
    if (s + 1 < slices) fetch(k_begin + (s + 1) * BK);
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

  if (g.partial) {
    float* out = g.partial + (int64_t(split) * g.batch + z) * g.M * g.N;
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j) {
        const int row = m0 + ty + i * T::kThreadsM, col = n0 + tx + j * T::kThreadsN;
        if (row < g.M && col < g.N) out[int64_t(row) * g.N + col] = acc[i][j];
      }
    return;
  }
  TC* C = g.C + z * g.strideC;
  TC* P = g.preact ? g.preact + z * g.strideC : nullptr;
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
      if (g.beta != 0.0f) v = fmaf(g.beta, load(C + at), v);
      if (g.bias) v += g.bias[col];
      if (P) {
        store(P + at, v);
        v = load(P + at);  // act of the value saved (as bias_act_forward_kernel)
      }
      store(C + at, act_forward(v, g.act, g.reduced));
    }
  }
}

// Split-K's second pass: C = act(alpha Σ_s partial[s] + beta C + bias), one thread per element.
constexpr int kReduceThreads = 256;
template <class TA, class TC>
__global__ void __launch_bounds__(kReduceThreads) gemm_splitk_reduce_kernel(GemmArgs<TA, TC> g, int splits) {
  const int64_t per_batch = int64_t(g.M) * g.N, total = per_batch * g.batch;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t z = e / per_batch, rc = e % per_batch, row = rc / g.N;
    const int col = int(rc % g.N);
    float sum = 0.0f;
    for (int s = 0; s < splits; ++s) sum += g.partial[int64_t(s) * total + e];
    const int64_t at = z * g.strideC + row * g.ldc + col;
    float v = g.alpha * sum;
    if (g.beta != 0.0f) v = fmaf(g.beta, load(g.C + at), v);
    if (g.bias) v += g.bias[col];
    if (g.preact) {
      store(g.preact + at, v);
      v = load(g.preact + at);
    }
    store(g.C + at, act_forward(v, g.act, g.reduced));
  }
}

template <int BM, int BN, int BK, int TM, int TN, class TA, class TC>
cudaError_t launch_gemm(const GemmArgs<TA, TC>& g, int splits, cudaStream_t s) {
  const dim3 grid(unsigned(ceil_div(g.N, BN)), unsigned(ceil_div(g.M, BM)), unsigned(g.batch * splits));
  return launch(gemm_kernel<BM, BN, BK, TM, TN, TA, TC>, grid, dim3(Tile<BM, BN, BK, TM, TN>::kThreads), 0, s, g);
}

// K slices for split-K: enough blocks for two waves of the small tiles, each slice at least
// kMinSplitK deep, at most kMaxSplits (1: no split).
constexpr int kMinSplitK = 256, kMaxSplits = 16;
int splits_for(int64_t small_tiles, int64_t K) {
  if (small_tiles >= kWaveTiles) return 1;
  int64_t s = ceil_div(2 * kWaveTiles, small_tiles);
  if (s > K / kMinSplitK) s = K / kMinSplitK;
  if (s > kMaxSplits) s = kMaxSplits;
  return s > 1 ? int(s) : 1;
}

}  // namespace

Status gemm_check(GemmDims* d) {
  NF_TRY(ops::gemm_check(d));  // the checks and leading-dimension defaults every backend shares
  NF_CHECK(d->M < INT_MAX && d->N < INT_MAX && d->K < INT_MAX, "gemm", "M, N and K must be below 2^31");
  NF_CHECK(d->batch <= 65535, "gemm", "batch must be in [1, 65535]");
  NF_CHECK(d->M <= 65535LL * 64, "gemm", "M is too large for the CUDA grid");
  return Status::Ok();
}

template <class TA, class TC>
Status gemm_kernel_only(TC* C, TC* preact, const TA* A, const TA* B, const float* bias, GemmDims d) {
  NF_TRY(cuda::gemm_check(&d));
  if (d.M == 0 || d.N == 0) return Status::Ok();
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  GemmArgs<TA, TC> g{nullptr,  d.batch,  int(d.K), C,     preact, A,     B,         bias,      int(d.M),  int(d.N),
                     int(d.K), d.transA, d.transB, d.lda, d.ldb,  d.ldc, d.strideA, d.strideB, d.strideC, d.alpha,
                     d.beta,   d.act,    std::is_same_v<TA, bf16>};
  if (ceil_div(d.M, 128) * ceil_div(d.N, 128) * d.batch >= kWaveTiles) {
    NF_CUDA_TRY("gemm", launch_gemm<128, 128, 8, 8, 8>(g, 1, s));
    return Status::Ok();
  }
  const int splits = d.batch * kMaxSplits <= 65535 ? splits_for(ceil_div(d.M, 64) * ceil_div(d.N, 64) * d.batch, d.K) : 1;
  if (splits == 1) {
    NF_CUDA_TRY("gemm", launch_gemm<64, 64, 16, 4, 4>(g, 1, s));
    return Status::Ok();
  }
  void* partial = nullptr;
  NF_TRY(workspace(0, sizeof(float) * size_t(splits * d.batch * d.M * d.N), &partial));
  g.partial = static_cast<float*>(partial);
  g.k_chunk = int(ceil_div(ceil_div(d.K, splits), 16) * 16);
  NF_CUDA_TRY("gemm", launch_gemm<64, 64, 16, 4, 4>(g, splits, s));
  const int64_t total = d.batch * d.M * d.N, blocks = ceil_div(total, kReduceThreads);
  NF_CUDA_TRY("gemm", launch(gemm_splitk_reduce_kernel<TA, TC>, dim3(unsigned(blocks < 4096 ? blocks : 4096)),
                             dim3(kReduceThreads), 0, s, g, splits));
  return Status::Ok();
}
template Status gemm_kernel_only(float*, float*, const float*, const float*, const float*, GemmDims);
template Status gemm_kernel_only(bf16*, bf16*, const bf16*, const bf16*, const float*, GemmDims);
template Status gemm_kernel_only(float*, float*, const bf16*, const bf16*, const float*, GemmDims);


// ---- The dispatch ------------------------------------------------------------------------------
namespace {

std::atomic<int64_t> g_kernel_products{0};

// bf16 operands take CUBLAS_COMPUTE_32F (float accumulation of exact bf16 products); the fast modes
// are for float operands.
template <class TA>
int compute_type(Compute mode) {
  if constexpr (std::is_same_v<TA, bf16>) return NF_CUBLAS_COMPUTE_32F;
  switch (mode) {
    case Compute::tf32: return NF_CUBLAS_COMPUTE_32F_FAST_TF32;
    case Compute::bf16: return NF_CUBLAS_COMPUTE_32F_FAST_16BF;
    default: return NF_CUBLAS_COMPUTE_32F;
  }
}

// cuBLASLt's column-major view of one of our row-major products: row-major C [M, N] is the
// column-major N x M matrix Cᵀ with the same ld, and C = op(A) op(B) is Cᵀ = op(B)ᵀ op(A)ᵀ, so
// cuBLASLt's A is our B (transposed when transB), its B our A (transposed when transA), m = N,
// n = M; our bias [N] is its bias over the rows of D, and Σ_k op(A)[m, k] its BGRADB over op(B).
template <class T>
constexpr int data_type() {
  return std::is_same_v<T, bf16> ? NF_CUDA_R_16BF : NF_CUDA_R_32F;
}

template <class TA, class TC>
lt::Product column_major(const GemmCallOf<TA, TC>& c, const GemmDims& d) {
  lt::Product p;
  p.a_type = data_type<TA>(), p.c_type = data_type<TC>();
  p.m = d.N, p.n = d.M, p.k = d.K, p.batch = d.batch;
  p.transa = d.transB, p.A = c.B, p.lda = d.ldb, p.strideA = d.strideB;
  p.transb = d.transA, p.B = c.A, p.ldb = d.lda, p.strideB = d.strideA;
  p.C = c.C_in ? c.C_in : c.C, p.D = c.C, p.ldc = d.ldc, p.strideC = d.strideC;
  p.alpha = d.alpha, p.beta = d.beta;
  p.compute = compute_type<TA>(c.mode);
  return p;
}

// Whether the call's products multiply bf16 values (bf16 operands, or float ones under Compute::bf16,
// cuBLASLt's FAST_16BF): its GELU then takes normcdf_reduced's Φ (activation.cuh), as the CPU's GELU fused
// into its bf16 products does. (The own kernel computes float operands in fp32: gemm_kernel_only
// decides by the operands' type alone.)
template <class TA, class TC>
bool bf16_products(const GemmCallOf<TA, TC>& c) {
  return std::is_same_v<TA, bf16> || c.mode == Compute::bf16;
}

// c.bias as cuBLASLt's BIAS epilogues take it, in C's type (cublasLt.h: the bias vector has D's type but
// for int8 and fp8 kernels; an fp32 bias with a bf16 D gets no algorithm): itself for float C; for bf16
// C the caller's rounded copy (c.bias_rounded), else a copy rounded to bf16 in scratch slot 4 (as
// torch.autocast rounds a Linear's bias).
template <class TA, class TC>
Status epilogue_bias(const GemmCallOf<TA, TC>& c, int64_t n, const void** out) {
  if constexpr (std::is_same<TC, float>::value) {
    *out = c.bias;
  } else if (c.bias_rounded) {
    *out = c.bias_rounded;
  } else {
    TC* copy = nullptr;
    NF_TRY(workspace_array(4, n, &copy));
    NF_TRY(convert(copy, c.bias, n));
    *out = copy;
  }
  return Status::Ok();
}

// The cuBLASLt epilogue doing everything the call asks for in one product, if there is one; bias is
// c.bias in C's type (epilogue_bias).
template <class TA, class TC>
bool fused_epilogue(const GemmCallOf<TA, TC>& c, const GemmDims& d, const void* bias, lt::Product* p) {
  if (c.dbias) {  // the weight gradient and its bias gradient: BGRADB over op(B) = our op(A)ᵀ
    if (!std::is_same<TC, float>::value) return false;  // (its output would be C's type, dbias is float)
    p->epilogue = NF_CUBLASLT_EPILOGUE_BGRADB;
    return true;  // bias_grad set by the caller (a scratch buffer: BGRADB overwrites)
  }
  if (c.dact_input) {  // dC = (dY W) ∘ gelu'(h): only GELU's tanh form has a cuBLASLt backward
    if (c.dact != Act::gelu_tanh) return false;
    p->epilogue = NF_CUBLASLT_EPILOGUE_DGELU;
    p->aux = const_cast<TC*>(c.dact_input), p->aux_ld = d.ldc, p->aux_stride = d.strideC;
    return true;
  }
  // The epilogues apply to alpha·AB + beta·C: the bias epilogue gives ours (a residual riding on a product as
  // its C); an activation after beta·C is left to the passes.
  if (d.beta != 0.0f && d.act != Act::none) return false;
  p->bias = bias;
  switch (d.act) {
    case Act::none:
      if (c.preact) return false;  // two outputs of the same value
      p->epilogue = bias ? NF_CUBLASLT_EPILOGUE_BIAS : NF_CUBLASLT_EPILOGUE_DEFAULT;
      return true;
    case Act::relu:
      if (c.preact) return false;  // RELU_AUX saves a bit mask, not the value
      p->epilogue = bias ? NF_CUBLASLT_EPILOGUE_RELU_BIAS : NF_CUBLASLT_EPILOGUE_RELU;
      return true;
    case Act::gelu_tanh:  // cuBLASLt's GELU is the tanh form (its documentation's formula)
      if (c.preact) {
        p->epilogue = bias ? NF_CUBLASLT_EPILOGUE_GELU_AUX_BIAS : NF_CUBLASLT_EPILOGUE_GELU_AUX;
        p->aux = c.preact, p->aux_ld = d.ldc, p->aux_stride = d.strideC;
      } else {
        p->epilogue = bias ? NF_CUBLASLT_EPILOGUE_GELU_BIAS : NF_CUBLASLT_EPILOGUE_GELU;
      }
      return true;
    default: return false;  // GELU's erf form, SiLU, tanh: our elementwise kernel after the product
  }
}

// The elementwise kernels run over C as [batch·M, N] rows: C (and preact) must be packed.
bool packed_c(const GemmDims& d) { return d.ldc == d.N && (d.batch == 1 || d.strideC == d.M * d.N); }

}  // namespace

const char* compute_name(Compute mode) {
  switch (mode) {
    case Compute::tf32: return "tf32";
    case Compute::bf16: return "bf16";
    default: return "fp32";
  }
}

template <class TA, class TC>
Status gemm(const GemmCallOf<TA, TC>& c) {
  GemmDims d = c.d;
  NF_TRY(cuda::gemm_check(&d));
  const int64_t rows = d.batch * d.M;
  if (c.dact_input) {
    NF_CHECK(d.beta == 0.0f && !c.bias && !c.preact && d.act == Act::none, "gemm",
             "an activation's backward takes beta 0, no bias, no preact and act 'none'");
    NF_CHECK(packed_c(d), "gemm", "an activation's backward needs C packed");
  }
  NF_CHECK(!c.C_in || (packed_c(d) && !c.dact_input && !c.dbias), "gemm", "C_in needs C packed and a forward product");
  if (c.dbias)
    NF_CHECK(d.transA && d.lda == d.M && d.batch == 1 && !c.dact_input && !c.bias && !c.preact && d.act == Act::none,
             "gemm", "the bias gradient rides on a plain weight-gradient product: transA, A packed, batch 1");
  if (d.M == 0 || d.N == 0) {  // no product; the bias gradient depends on A alone
    if (c.dbias && d.M > 0) NF_TRY(bias_grad(c.dbias, c.A, d.K, d.M, nullptr));
    return Status::Ok();
  }
  if (d.K > 0 && lt::available()) {
    bool ran = false;
    // 1. One cuBLASLt product with everything in its epilogue.
    lt::Product p = column_major(c, d);
    uint32_t tried = 0;
    const void* bias = nullptr;
    if (c.bias) NF_TRY(epilogue_bias(c, d.N, &bias));
    if (fused_epilogue(c, d, bias, &p)) {
      float* grad = nullptr;
      if (c.dbias) NF_TRY(workspace_array(0, d.M, &grad));  // BGRADB overwrites: a scratch, then +=
      p.bias_grad = grad;
      tried = p.epilogue;
      NF_TRY(lt::matmul(p, &ran));
      if (ran) return c.dbias ? add(c.dbias, c.dbias, grad, d.M) : Status::Ok();
    }
    // 2. The product through cuBLASLt (with the bias in its epilogue, then without), then the
    // backend's elementwise kernels over packed C for the rest.
    const bool on_c = c.bias || c.preact || d.act != Act::none || c.dact_input;  // passes over C
    if ((on_c || c.dbias) && (!on_c || packed_c(d))) {
      for (bool bias_in_epilogue : {true, false}) {
        if (bias_in_epilogue && (!c.bias || d.beta != 0.0f || tried == NF_CUBLASLT_EPILOGUE_BIAS)) continue;
        p = column_major(c, d);
        const float* pending = bias_in_epilogue ? nullptr : c.bias;  // still to add
        TC* out = c.preact && d.act != Act::none && d.beta == 0.0f ? c.preact : c.C;  // the value before act
        p.D = out;
        if (bias_in_epilogue) p.epilogue = NF_CUBLASLT_EPILOGUE_BIAS, p.bias = bias;
        NF_TRY(lt::matmul(p, &ran));
        if (!ran) continue;
        const BiasActDims e{rows, d.N, d.act, bf16_products(c)};
        if (out != c.C) NF_TRY(bias_act_forward(c.C, pending ? c.preact : nullptr, out, pending, e));
        else if (pending || d.act != Act::none || c.preact) NF_TRY(bias_act_forward(c.C, c.preact, c.C, pending, e));
        if (c.dact_input) NF_TRY(bias_act_backward(c.C, nullptr, c.C, c.dact_input, {rows, d.N, c.dact}));
        if (c.dbias) NF_TRY(bias_grad(c.dbias, c.A, d.K, d.M, nullptr));
        return Status::Ok();
      }
    }
  }
  // 3. The backend's own kernel (beta·C read from C: C_in copied there first).
  ++g_kernel_products;
  if (c.C_in && d.beta != 0.0f) NF_TRY(copy_on_device(c.C, c.C_in, sizeof(TC) * size_t(rows * d.N)));
  NF_TRY(gemm_kernel_only(c.C, c.preact, c.A, c.B, c.bias, d));
  if (c.dact_input) NF_TRY(bias_act_backward(c.C, nullptr, c.C, c.dact_input, {rows, d.N, c.dact}));
  if (c.dbias) NF_TRY(bias_grad(c.dbias, c.A, d.K, d.M, nullptr));
  return Status::Ok();
}
template Status gemm(const GemmCallOf<float, float>&);
template Status gemm(const GemmCallOf<bf16, bf16>&);
template Status gemm(const GemmCallOf<bf16, float>&);

Status run(const ops::Gemm<float>& p) { return gemm(p.C, p.preact, p.A, p.B, p.bias, p.d, compute_of(p.precision)); }

GemmBackendInfo gemm_backend_info() { return {lt::info(), g_kernel_products}; }

}  // namespace nf::cuda
