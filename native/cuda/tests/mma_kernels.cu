// Test kernels of ../mma.cuh (see mma_kernels.h). The operand loads spell out the PTX ISA's fragment
// layouts (section 9.7.14.5, "Matrix Fragments for mma.m16n8k16 with floating point type" and
// "Matrix Fragments for mma.m16n8k8"), with g = lane >> 2 (groupID) and t = lane % 4
// (threadID_in_group), independently of the emulator's implementation of them.
#include "mma_kernels.h"

#include "../common.cuh"
#include "../mma.cuh"

namespace nf::cuda {

namespace {

// One warp: each lane loads its fragment registers from A, B, C by the ISA's row/column formulas,
// runs the mma, and stores its d registers by the C/D formula.
template <bool F16>
__global__ void __launch_bounds__(32)
    mma_m16n8k16_kernel(const uint16_t* A, const uint16_t* B, const float* C, float* D) {
  const int lane = int(threadIdx.x), g = lane >> 2, t = lane % 4;
  uint32_t a[4], b[2];
  float c[4], d[4];
  for (int r = 0; r < 4; ++r) {  // a(2r) in the low half of register r, a(2r+1) in the high half
    uint32_t reg = 0;
    for (int h = 0; h < 2; ++h) {
      const int i = 2 * r + h;
      const int row = (i < 2 || (i >= 4 && i < 6)) ? g : g + 8;
      const int col = t * 2 + (i & 1) + (i >= 4 ? 8 : 0);
      reg |= uint32_t(A[row * 16 + col]) << (16 * h);
    }
    a[r] = reg;
  }
  for (int r = 0; r < 2; ++r) {
    uint32_t reg = 0;
    for (int h = 0; h < 2; ++h) {
      const int i = 2 * r + h;
      const int row = t * 2 + (i & 1) + (i >= 2 ? 8 : 0);  // k
      reg |= uint32_t(B[row * 8 + g]) << (16 * h);        // column n = groupID
    }
    b[r] = reg;
  }
  for (int i = 0; i < 4; ++i) c[i] = C[(i < 2 ? g : g + 8) * 8 + t * 2 + (i & 1)];
  if (F16) mma_m16n8k16_f16(d, a, b, c);
  else mma_m16n8k16_bf16(d, a, b, c);
  for (int i = 0; i < 4; ++i) D[(i < 2 ? g : g + 8) * 8 + t * 2 + (i & 1)] = d[i];
}

__global__ void __launch_bounds__(32)
    mma_m16n8k8_tf32_kernel(bool round_inputs, const uint32_t* A, const uint32_t* B, const float* C, float* D) {
  const int lane = int(threadIdx.x), g = lane >> 2, t = lane % 4;
  uint32_t a[4], b[2];
  float c[4], d[4];
  for (int i = 0; i < 4; ++i) a[i] = A[((i == 0 || i == 2) ? g : g + 8) * 8 + (i < 2 ? t : t + 4)];
  for (int i = 0; i < 2; ++i) b[i] = B[(t + 4 * i) * 8 + g];
  if (round_inputs) {
    for (uint32_t& x : a) x = to_tf32(__uint_as_float(x));
    for (uint32_t& x : b) x = to_tf32(__uint_as_float(x));
  }
  for (int i = 0; i < 4; ++i) c[i] = C[(i < 2 ? g : g + 8) * 8 + t * 2 + (i & 1)];
  mma_m16n8k8_tf32(d, a, b, c);
  for (int i = 0; i < 4; ++i) D[(i < 2 ? g : g + 8) * 8 + t * 2 + (i & 1)] = d[i];
}

constexpr int kSlots = 33;  // 32 matrix rows + the decoy

// Shared rows 32 bytes apart (16-byte aligned); each holds one 16-byte matrix row.
struct alignas(16) LdmatrixSmem {
  uint16_t slot[kSlots][16];
};

template <int N, bool Trans>
__global__ void __launch_bounds__(32) ldmatrix_kernel(const uint16_t* src, const int* slot, uint32_t* out) {
  NF_SHARED(LdmatrixSmem, smem);
  const int lane = int(threadIdx.x);
  for (int i = lane; i < kSlots * 8; i += 32) smem.slot[slot[i / 8]][i % 8] = src[i];
  __syncthreads();  // ldmatrix reads rows other lanes wrote
  const int row = lane < 8 * N ? lane : kSlots - 1;  // lanes past the used ones: the decoy
  uint32_t r[N];
  if (Trans) ldmatrix_trans<N>(r, &smem.slot[slot[row]][0]);
  else ldmatrix<N>(r, &smem.slot[slot[row]][0]);
  for (int i = 0; i < N; ++i) out[lane * N + i] = r[i];
}

struct alignas(16) CpAsyncSmem {
  float v[mma_test::kCpAsyncFloats];
};

__global__ void __launch_bounds__(32) cp_async_kernel(const float* src, float* out) {
  NF_SHARED(CpAsyncSmem, smem);
  const int lane = int(threadIdx.x);
  cp_async_ca<4>(&smem.v[lane], &src[lane]);
  cp_async_ca<8>(&smem.v[32 + 2 * lane], &src[32 + 2 * lane]);
  cp_async_commit();
  cp_async_ca<16>(&smem.v[96 + 4 * lane], &src[96 + 4 * lane]);
  cp_async_cg(&smem.v[224 + 4 * lane], &src[224 + 4 * lane]);
  cp_async_commit();
  cp_async_cg_zfill(&smem.v[352 + 4 * lane], &src[352 + 4 * lane], unsigned(lane % 17));
  cp_async_commit();
  cp_async_wait<2>();
  cp_async_wait<1>();
  cp_async_wait<0>();
  __syncthreads();
  for (int i = lane; i < mma_test::kCpAsyncFloats; i += 32) out[i] = smem.v[i];
}

__global__ void __launch_bounds__(256) convert_kernel(const float* x, int n, uint32_t* packed, uint32_t* tf32) {
  for (int i = int(blockIdx.x * blockDim.x + threadIdx.x); i < n; i += int(gridDim.x * blockDim.x)) {
    tf32[i] = to_tf32(x[i]);
    if (i % 2 == 0) packed[i / 2] = pack_bf16x2(x[i], x[i + 1]);
  }
}

// ---- The tiled GEMM -------------------------------------------------------------------------------
constexpr int kBM = 64, kBN = 64, kBK = 16, kGemmThreads = 128;
constexpr int kAStride = kBK + 8;  // bf16 per shared row of A: 48 bytes (16-byte aligned rows)
constexpr int kBStride = kBN + 8;  // of B: 144 bytes

struct alignas(16) GemmSmem {
  uint16_t a[2][kBM * kAStride];  // [buffer][m][k]
  uint16_t b[2][kBK * kBStride];  // [buffer][k][n]
};

// Warps 2x2 over the 64x64 tile, 32x32 each: 2 m16 x 4 n8 mma tiles per k-step of 16.
__global__ void __launch_bounds__(kGemmThreads)
    mma_gemm_bf16_kernel(const uint16_t* A, const uint16_t* B, float* C, int N, int K) {
  NF_SHARED(GemmSmem, smem);
  const int tid = int(threadIdx.x), lane = tid % 32, warp = tid / 32;
  const int wm = warp / 2, wn = warp % 2, g = lane >> 2, t = lane % 4;
  const int m0 = int(blockIdx.y) * kBM, n0 = int(blockIdx.x) * kBN;
  // One 16-byte chunk of each tile per thread: A 64 rows x 2 chunks, B 16 rows x 8 chunks.
  auto load_tile = [&](int kt, int buf) {
    const int k0 = kt * kBK;
    const int ar = tid / 2, ac = (tid % 2) * 8;
    cp_async_cg(&smem.a[buf][ar * kAStride + ac], &A[size_t(m0 + ar) * size_t(K) + size_t(k0 + ac)]);
    const int br = tid / 8, bc = (tid % 8) * 8;
    cp_async_cg(&smem.b[buf][br * kBStride + bc], &B[size_t(k0 + br) * size_t(N) + size_t(n0 + bc)]);
  };
  float acc[2][4][4] = {};
  const int tiles = K / kBK;
  load_tile(0, 0);
  cp_async_commit();
  for (int kt = 0; kt < tiles; ++kt) {
    const int buf = kt & 1;
    if (kt + 1 < tiles) {
      load_tile(kt + 1, buf ^ 1);  // the buffer every warp finished reading before the last barrier
      cp_async_commit();
      cp_async_wait<1>();  // this thread's copies of tile kt have landed
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // ... and every thread's
    uint32_t a[2][4], b[4][2];
    for (int mi = 0; mi < 2; ++mi)  // lanes 0-15: rows 0-15 at k 0; lanes 16-31: rows 0-15 at k 8
      ldmatrix<4>(a[mi], &smem.a[buf][(wm * 32 + mi * 16 + lane % 16) * kAStride + (lane / 16) * 8]);
    for (int nj = 0; nj < 4; nj += 2) {  // k rows lane % 16, n tiles nj (lanes 0-15) and nj + 1
      uint32_t r[4];
      ldmatrix_trans<4>(r, &smem.b[buf][(lane % 16) * kBStride + wn * 32 + nj * 8 + (lane / 16) * 8]);
      b[nj][0] = r[0], b[nj][1] = r[1], b[nj + 1][0] = r[2], b[nj + 1][1] = r[3];
    }
    for (int mi = 0; mi < 2; ++mi)
      for (int ni = 0; ni < 4; ++ni) mma_m16n8k16_bf16(acc[mi][ni], a[mi], b[ni], acc[mi][ni]);
    __syncthreads();  // every warp is done with `buf` before the next iteration refills it
  }
  for (int mi = 0; mi < 2; ++mi)
    for (int ni = 0; ni < 4; ++ni)
      for (int i = 0; i < 4; ++i) {
        const int row = m0 + wm * 32 + mi * 16 + g + (i < 2 ? 0 : 8);
        const int col = n0 + wn * 32 + ni * 8 + t * 2 + (i & 1);
        C[size_t(row) * size_t(N) + size_t(col)] = acc[mi][ni][i];
      }
}

}  // namespace

namespace mma_test {

Status mma_m16n8k16(bool f16, const uint16_t* A, const uint16_t* B, const float* C, float* D) {
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  if (f16) NF_CUDA_TRY("mma_m16n8k16", launch(mma_m16n8k16_kernel<true>, dim3(1), dim3(32), 0, s, A, B, C, D));
  else NF_CUDA_TRY("mma_m16n8k16", launch(mma_m16n8k16_kernel<false>, dim3(1), dim3(32), 0, s, A, B, C, D));
  return Status::Ok();
}

Status mma_m16n8k8_tf32(bool round_inputs, const uint32_t* A, const uint32_t* B, const float* C, float* D) {
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  NF_CUDA_TRY("mma_m16n8k8_tf32", launch(mma_m16n8k8_tf32_kernel, dim3(1), dim3(32), 0, s, round_inputs, A, B, C, D));
  return Status::Ok();
}

Status ldmatrix(int num, bool trans, const uint16_t* src, const int* slot, uint32_t* out) {
  const char* op = "ldmatrix";
  NF_CHECK(num == 1 || num == 2 || num == 4, op, "num must be 1, 2 or 4");
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  auto kernel = num == 1 ? (trans ? ldmatrix_kernel<1, true> : ldmatrix_kernel<1, false>)
                : num == 2 ? (trans ? ldmatrix_kernel<2, true> : ldmatrix_kernel<2, false>)
                           : (trans ? ldmatrix_kernel<4, true> : ldmatrix_kernel<4, false>);
  NF_CUDA_TRY(op, launch(kernel, dim3(1), dim3(32), 0, s, src, slot, out));
  return Status::Ok();
}

Status cp_async_copy(const float* src, float* out) {
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  NF_CUDA_TRY("cp_async_copy", launch(cp_async_kernel, dim3(1), dim3(32), 0, s, src, out));
  return Status::Ok();
}

Status convert(const float* x, int n, uint32_t* packed, uint32_t* tf32) {
  const char* op = "convert";
  NF_CHECK(n > 0 && n % 2 == 0, op, "n must be positive and even");
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  NF_CUDA_TRY(op, launch(convert_kernel, dim3(unsigned(ceil_div(n, 256))), dim3(256), 0, s, x, n, packed, tf32));
  return Status::Ok();
}

Status gemm_bf16(const uint16_t* A, const uint16_t* B, float* C, int M, int N, int K) {
  const char* op = "gemm_bf16";
  NF_CHECK(M > 0 && N > 0 && K > 0 && M % kBM == 0 && N % kBN == 0 && K % kBK == 0, op,
           "M, N must be positive multiples of 64, K of 16");
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  NF_CUDA_TRY(op, launch(mma_gemm_bf16_kernel, dim3(unsigned(N / kBN), unsigned(M / kBM)), dim3(kGemmThreads), 0, s,
                         A, B, C, N, K));
  return Status::Ok();
}

}  // namespace mma_test

}  // namespace nf::cuda
