// Internal to flash_attention_forward.cu and flash_attention_backward.cu: the tile machinery of the
// tensor-core attention kernels (FlashAttention-2's structure on mma.sync).
//
// A CTA has 4 warps and owns rows of one (b, h): its "stationary" tiles, staged in shared memory once
// (the forward: 128 queries, 32 per warp as two 16-row mma blocks; the backward: 64 keys (dK/dV) or
// 64 queries (dQ), 16 per warp, whose two fp32 16 x DP accumulators per warp leave no registers for
// a second block). The other side streams past in tiles of R rows (R = 64, or 32 / 16 where the head
// is wide: stream_rows), two matrices at a time (K and V, or Q and dO): a PairStream, double-buffered
// with cp.async. Every product is a warp's 16-row block(s) against a tile:
//   mma_abt: s (16 x R a block, fp32 registers) += A Bᵀ over the head width (S = Q Kᵀ, dP = dO Vᵀ, ...)
//   mma_pb:  acc (16 x DP) += P B               with P the fp32 registers of an mma_abt (O += P V,
//                                               dQ += dS K, dV += Pᵀ dO, dK += dSᵀ Q), converted to
//                                               the operand type in registers (FlashAttention-2's
//                                               register reuse: no shared-memory round trip for P)
// Operand policies (Mma): Bf16Mma, mma.sync m16n8k16 bf16 x bf16 + fp32, fragments by ldmatrix
// (.trans for the "k rows" operand), and Tf32Mma, m16n8k8 tf32 with the same structure, fragments
// read from fp32 shared memory and rounded by cvt.rna.tf32; Fp32Mma, the same fragments split into
// big + small tf32 halves, three mma.sync a product (3xTF32: fp32 accuracy for precision 'fp32'). The accumulator of m16n8k16 is exactly
// an A fragment of the next product (columns 2t, 2t+1 of rows g, g+8 per 8 columns); for m16n8k8 it
// is not, so Tf32Mma's a_acc relabels k (accumulator column 2t as the mma's k = t, 2t+1 as t + 4) and
// its b_kn reads B's rows in the same order: the sum over k is the same, no shuffles.
//
// Storage. S is the element type of the tensors in global memory: float (the layer's fp32 storage,
// precisions 'tf32' and 'bf16'), or bfloat16 bits as uint16_t (the layer's bf16 storage, precision
// 'bf16', Bf16Mma only: value_of reads it, and with the operand type equal to S the stream copies
// straight into operand tiles). The outputs (o; dq, dk, dv) are stored as O (float, or bfloat16 bits
// rounded to nearest even: put); lse, Di and every statistic stay fp32. When S differs from the
// operand type (float -> bf16), a tile lands by cp.async in a raw fp32 buffer and one pass converts
// it to the operand tile (then one raw stage suffices: the copy of tile n + 1 overlaps the products
// of tile n); when they are equal (tf32 on float) the raw tiles are the operands, two stages.
// Views whose rows are not 16-byte aligned (head widths not a multiple of 4, odd strides) are read
// by plain loads instead of cp.async (same tiles, no overlap).
// Shared rows are padded by 16 bytes (ld_of): ldmatrix's 8 rows and the tf32 fragment reads then
// fall in distinct banks.
// Head width: DP = Dh rounded up to 32, 64, 96 or 128 (padded_width); columns Dh..DP-1 are zero.
#pragma once
#include <climits>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "attention_core.cuh"
#include "mma.cuh"

namespace nf::cuda::flash {

constexpr int kWarps = 4, kThreads = kWarps * kWarp;
constexpr int kWarpRows = 16;                    // rows of an mma (M): a warp owns 1 or 2 such blocks
constexpr int kBlockRows = kWarps * kWarpRows;   // the backward CTAs' stationary rows (1 block a warp)
constexpr size_t kSmemMax = 99 * 1024;           // dynamic shared memory of the smallest target (sm_89)
constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;
// A last streamed tile whose live rows fit in kShortTile (an mma's 16) takes the products of those rows
// only: T = 64k + 1 (a ViT's class token: T 65, 197, 257, 577) leaves 1 or 5 live rows of a 64-row tile.
// Not where the head is 128 wide (a second copy of the forward's tile spilled there on sm_90).
constexpr int kShortTile = 16;
template <int R, int DP>
__host__ __device__ constexpr bool has_short_tile() {
  return R > kShortTile && DP < 128;
}

__host__ __device__ constexpr int padded_width(int Dh) { return Dh <= 32 ? 32 : Dh <= 64 ? 64 : Dh <= 96 ? 96 : 128; }

// Elements per shared row of a [rows][DP] tile of E: DP plus 16 bytes.
template <class E, int DP>
__host__ __device__ constexpr int ld_of() {
  return DP + 16 / int(sizeof(E));
}
template <class E, int DP>
__host__ __device__ constexpr size_t tile_bytes(int rows) {
  return sizeof(E) * size_t(rows) * size_t(ld_of<E, DP>());
}

// A stored element as fp32: float, or bfloat16 bits.
__device__ __forceinline__ float value_of(float x) { return x; }
__device__ __forceinline__ float value_of(uint16_t bits) { return bf16_value(bits); }

// Stores fp32 x as an element of an output's storage: float, or bfloat16 bits (round to nearest even).
__device__ __forceinline__ void put(float* p, float x) { *p = x; }
__device__ __forceinline__ void put(uint16_t* p, float x) { *p = bf16_bits(x); }

// 2^x in one MUFU instruction: ex2.approx.ftz.f32, whose results below 2^-126 are 0 (exp2f is
// ex2.approx.f32, which keeps such results by a range test and two scalings around the MUFU: 4
// instructions a score instead of 1). Every caller's x is a score minus its row's max or lse, where
// 2^x < 2^-126 adds nothing a float sum of terms up to 1 can hold.
__device__ __forceinline__ float exp2_ftz(float x) {
#if defined(__CUDACC__)
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  const float y = std::exp2(x);
  return std::fpclassify(y) == FP_SUBNORMAL ? 0.0f : y;
#endif
}

// Two adjacent fp32 values as elements p[0], p[1] of an output (p aligned to the pair): one store.
__device__ __forceinline__ void put2(float* p, float x0, float x1) { *reinterpret_cast<float2*>(p) = make_float2(x0, x1); }
__device__ __forceinline__ void put2(uint16_t* p, float x0, float x1) {
  *reinterpret_cast<uint32_t*>(p) = pack_bf16x2(x0, x1);
}

// fp32 as an operand element: float (tf32 rounding happens at the fragment), or bfloat16 bits.
template <class Op>
__device__ __forceinline__ Op operand(float x) {
  if constexpr (std::is_same<Op, float>::value) return x;
  else return bf16_bits(x);
}

// ---- Operand policies -------------------------------------------------------------------------
// Fragment coordinates (mma.cuh): g = lane >> 2, t = lane & 3; accumulator element e of an n8 tile
// is row g + 8 (e >> 1), column 2t + (e & 1).
struct Bf16Mma {
  using Op = uint16_t;
  static constexpr int kK = 16, kA = 4, kB = 2;
  // A (16 x 16) from a row-major operand tile, T at the fragment's (row 0, k 0).
  __device__ static void a_tile(uint32_t (&a)[4], const Op* T, int ld, int lane) {
    ldmatrix<4>(a, T + (lane % 16) * ld + (lane / 16) * 8);
  }
  // A from a row-major operand tile with k in b_kn's order (a_acc's): for m16n8k16 the plain order.
  __device__ static void a_tile_kn(uint32_t (&a)[4], const Op* T, int ld, int lane) { a_tile(a, T, ld, lane); }
  // A from fp32 accumulators: c[0], c[1] the n8 tiles of columns k 0-7 and 8-15.
  __device__ static void a_acc(uint32_t (&a)[4], const float (*c)[4]) {
    a[0] = pack_bf16x2(c[0][0], c[0][1]);
    a[1] = pack_bf16x2(c[0][2], c[0][3]);
    a[2] = pack_bf16x2(c[1][0], c[1][1]);
    a[3] = pack_bf16x2(c[1][2], c[1][3]);
  }
  // B of two n8 tiles with B[k][n] = T[n][k] (T's rows are n), T at (n 0, k 0).
  __device__ static void b_nk(uint32_t (&b)[2][2], const Op* T, int ld, int lane) {
    uint32_t r[4];
    ldmatrix<4>(r, T + (lane % 8 + (lane / 16) * 8) * ld + ((lane / 8) % 2) * 8);
    b[0][0] = r[0], b[0][1] = r[1], b[1][0] = r[2], b[1][1] = r[3];
  }
  // B of two n8 tiles with B[k][n] = T[k][n] (T's rows are k), T at (k 0, n 0).
  __device__ static void b_kn(uint32_t (&b)[2][2], const Op* T, int ld, int lane) {
    uint32_t r[4];
    ldmatrix_trans<4>(r, T + (lane % 16) * ld + (lane / 16) * 8);
    b[0][0] = r[0], b[0][1] = r[1], b[1][0] = r[2], b[1][1] = r[3];
  }
  __device__ static void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    mma_m16n8k16_bf16(d, a, b, d);
  }
};

// m16n8k8 tf32 for 'tf32' (kSplit false: each operand rounded to tf32, 10 mantissa bits) and for fp32
// (kSplit true, Fp32Mma: the 3xTF32 split of CUTLASS's OpMultiplyAddFastF32). The split writes x as
// big + small, big = tf32(x), small = tf32(x − big) (x − big is exact), and takes a·b as
// big_a·small_b + small_a·big_b + big_a·big_b (small terms first; small_a·small_b, under 2^-22 of the
// product, dropped): each product to ~2^-21 relative, below fp32's accumulation error over a row,
// at a third of the tf32 tensor rate. Fragments hold raw fp32 bits then (kA = 4 big + 4 small).
template <bool kSplit>
struct TfMma {
  using Op = float;
  static constexpr int kK = 8, kA = kSplit ? 8 : 4, kB = kSplit ? 4 : 2;
  // Register i of a fragment from x (kSplit: big at i, small at i + n, n the fragment's size).
  template <int n>
  __device__ static void set(uint32_t* f, int i, float x) {
    if constexpr (kSplit) {
      f[i] = to_tf32(x);
      f[i + n] = to_tf32(x - __uint_as_float(f[i]));
    } else {
      f[i] = to_tf32(x);
    }
  }
  __device__ static void a_tile(uint32_t (&a)[kA], const Op* T, int ld, int lane) {
    const int g = lane >> 2, t = lane & 3;
    set<4>(a, 0, T[g * ld + t]), set<4>(a, 1, T[(g + 8) * ld + t]);
    set<4>(a, 2, T[g * ld + t + 4]), set<4>(a, 3, T[(g + 8) * ld + t + 4]);
  }
  // A from a row-major operand tile with k in b_kn's order: the mma's k = t is column 2t, k = t + 4
  // column 2t + 1 (as a_acc).
  __device__ static void a_tile_kn(uint32_t (&a)[kA], const Op* T, int ld, int lane) {
    const int g = lane >> 2, t = lane & 3;
    set<4>(a, 0, T[g * ld + 2 * t]), set<4>(a, 1, T[(g + 8) * ld + 2 * t]);
    set<4>(a, 2, T[g * ld + 2 * t + 1]), set<4>(a, 3, T[(g + 8) * ld + 2 * t + 1]);
  }
  // k = t is accumulator column 2t, k = t + 4 column 2t + 1 (b_kn reads B in that order).
  __device__ static void a_acc(uint32_t (&a)[kA], const float (*c)[4]) {
    set<4>(a, 0, c[0][0]), set<4>(a, 1, c[0][2]), set<4>(a, 2, c[0][1]), set<4>(a, 3, c[0][3]);
  }
  __device__ static void b_nk(uint32_t (&b)[2][kB], const Op* T, int ld, int lane) {
    const int g = lane >> 2, t = lane & 3;
    for (int j = 0; j < 2; ++j) set<2>(b[j], 0, T[(8 * j + g) * ld + t]), set<2>(b[j], 1, T[(8 * j + g) * ld + t + 4]);
  }
  __device__ static void b_kn(uint32_t (&b)[2][kB], const Op* T, int ld, int lane) {
    const int g = lane >> 2, t = lane & 3;
    for (int j = 0; j < 2; ++j) set<2>(b[j], 0, T[2 * t * ld + 8 * j + g]), set<2>(b[j], 1, T[(2 * t + 1) * ld + 8 * j + g]);
  }
  __device__ static void mma(float (&d)[4], const uint32_t (&a)[kA], const uint32_t (&b)[kB]) {
    const uint32_t(&big_a)[4] = *reinterpret_cast<const uint32_t(*)[4]>(&a[0]);
    const uint32_t(&big_b)[2] = *reinterpret_cast<const uint32_t(*)[2]>(&b[0]);
    if constexpr (kSplit) {
      const uint32_t(&small_a)[4] = *reinterpret_cast<const uint32_t(*)[4]>(&a[4]);
      const uint32_t(&small_b)[2] = *reinterpret_cast<const uint32_t(*)[2]>(&b[2]);
      mma_m16n8k8_tf32(d, big_a, small_b, d);
      mma_m16n8k8_tf32(d, small_a, big_b, d);
    }
    mma_m16n8k8_tf32(d, big_a, big_b, d);
  }
};
struct Tf32Mma : TfMma<false> {};  // (named types, not aliases: kernel names in ptxas's report say which)
struct Fp32Mma : TfMma<true> {};

// Row and column, in the warp's 16 x N product, of accumulator element e of n8 tile n.
__device__ __forceinline__ int acc_row(int lane, int e) { return (lane >> 2) + 8 * (e >> 1); }
__device__ __forceinline__ int acc_col(int lane, int n, int e) { return 8 * n + 2 * (lane & 3) + (e & 1); }

// f(x, r, c) for each accumulator element x of a warp's MB 16 x 8N products: r its row (0 .. 16 MB - 1),
// c its column.
template <int MB, int N, class F>
__device__ __forceinline__ void for_each_acc(float (&s)[MB][N][4], int lane, F f) {
#pragma unroll
  for (int m = 0; m < MB; ++m)
#pragma unroll
    for (int t = 0; t < N; ++t)
#pragma unroll
      for (int e = 0; e < 4; ++e) f(s[m][t][e], m * kWarpRows + acc_row(lane, e), acc_col(lane, t, e));
}

// Over the 4 lanes holding one accumulator row.
__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(kFullMask, v, 1));
  return fmaxf(v, __shfl_xor_sync(kFullMask, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(kFullMask, v, 1);
  return v + __shfl_xor_sync(kFullMask, v, 2);
}

// s[m][n][.] += A Bᵀ over the head width: A the warp's MB 16-row blocks (consecutive rows), B N rows,
// both [.][DP] operand tiles. Each B fragment serves the MB blocks: MB = 2 halves the shared-memory
// reads per FLOP.
template <class Mma, int MB, int N, int DP>
__device__ __forceinline__ void mma_abt(float (&s)[MB][N / 8][4], const typename Mma::Op* A, const typename Mma::Op* B,
                                        int lane) {
  constexpr int ld = ld_of<typename Mma::Op, DP>();
#pragma unroll
  for (int k = 0; k < DP; k += Mma::kK) {
    uint32_t a[MB][Mma::kA];
#pragma unroll
    for (int m = 0; m < MB; ++m) Mma::a_tile(a[m], A + m * kWarpRows * ld + k, ld, lane);
#pragma unroll
    for (int n = 0; n < N / 8; n += 2) {
      uint32_t b[2][Mma::kB];
      Mma::b_nk(b, B + n * 8 * ld + k, ld, lane);
#pragma unroll
      for (int m = 0; m < MB; ++m) {
        Mma::mma(s[m][n], a[m], b[0]);
        Mma::mma(s[m][n + 1], a[m], b[1]);
      }
    }
  }
}

// acc[m][n][.] += P B: P the warp's MB x 16 x K fp32 accumulators (an mma_abt's), B a [K][DP] operand tile.
template <class Mma, int MB, int K, int DP>
__device__ __forceinline__ void mma_pb(float (&acc)[MB][DP / 8][4], const float (&p)[MB][K / 8][4],
                                       const typename Mma::Op* B, int lane) {
  constexpr int ld = ld_of<typename Mma::Op, DP>();
#pragma unroll
  for (int k = 0; k < K; k += Mma::kK) {
    uint32_t a[MB][Mma::kA];
#pragma unroll
    for (int m = 0; m < MB; ++m) Mma::a_acc(a[m], &p[m][k / 8]);
#pragma unroll
    for (int n = 0; n < DP / 8; n += 2) {
      uint32_t b[2][Mma::kB];
      Mma::b_kn(b, B + k * ld + n * 8, ld, lane);
#pragma unroll
      for (int m = 0; m < MB; ++m) {
        Mma::mma(acc[m][n], a[m], b[0]);
        Mma::mma(acc[m][n + 1], a[m], b[1]);
      }
    }
  }
}

// acc[n][.] += A B: A the warp's 16-row block of a [.][lda] operand tile (its first K columns), B a [K][ldb]
// operand tile whose rows are k (its first 8N columns). (dQ += dS K from a shared dS tile: flash_dkdv_kernel.)
template <class Mma, int K, int N>
__device__ __forceinline__ void mma_ab(float (&acc)[N][4], const typename Mma::Op* A, int lda,
                                       const typename Mma::Op* B, int ldb, int lane) {
#pragma unroll
  for (int k = 0; k < K; k += Mma::kK) {
    uint32_t a[Mma::kA];
    Mma::a_tile_kn(a, A + k, lda, lane);
#pragma unroll
    for (int n = 0; n < N; n += 2) {
      uint32_t b[2][Mma::kB];
      Mma::b_kn(b, B + k * ldb + n * 8, ldb, lane);
      Mma::mma(acc[n], a, b[0]);
      Mma::mma(acc[n + 1], a, b[1]);
    }
  }
}

// ---- Tiles from global memory -----------------------------------------------------------------
// Four consecutive elements of S as fp32 (p null: zeros): one 16-byte (float) or 8-byte (bf16) load.
__device__ __forceinline__ void load4(float (&x)[4], const float* p) {
  const float4 v = p ? *reinterpret_cast<const float4*>(p) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  x[0] = v.x, x[1] = v.y, x[2] = v.z, x[3] = v.w;
}
__device__ __forceinline__ void load4(float (&x)[4], const uint16_t* p) {
  const int2 v = p ? *reinterpret_cast<const int2*>(p) : make_int2(0, 0);
  const uint32_t lo = uint32_t(v.x), hi = uint32_t(v.y);
  x[0] = bf16_value(uint16_t(lo)), x[1] = bf16_value(uint16_t(lo >> 16));
  x[2] = bf16_value(uint16_t(hi)), x[3] = bf16_value(uint16_t(hi >> 16));
}

// Four fp32 values as consecutive operand elements at p (4-element aligned in a tile): one 8-byte
// (bf16) or 16-byte (float) store.
__device__ __forceinline__ void put_operands4(uint16_t* p, const float (&x)[4]) {
  *reinterpret_cast<int2*>(p) = make_int2(int(pack_bf16x2(x[0], x[1])), int(pack_bf16x2(x[2], x[3])));
}
__device__ __forceinline__ void put_operands4(float* p, const float (&x)[4]) {
  *reinterpret_cast<float4*>(p) = make_float4(x[0], x[1], x[2], x[3]);
}

// Rows [t0, t0 + R) of a head's [T, Dh] view (row stride rs) into a [R][DP] tile of Op by plain loads
// (zeros past T and past Dh): groups of 4 elements a load where `vec` (rows 16-byte aligned, Dh a
// multiple of the 16-byte chunk), single elements elsewhere. Each thread issues a batch of loads (4
// groups or 8 elements; more spilled at DP 128) before their stores: a store to the shared tile could
// alias the next load as far as the compiler knows, so one load per store would wait out every load's
// latency in turn (estimated from an H200 run: ~30K cycles for the forward's 128-row query tile).
template <int G, int R, int DP, class Op, class S>
__device__ __forceinline__ void load_rows_by(Op* dst, const S* src, int64_t rs, int t0, int T, int Dh) {
  constexpr int ld = ld_of<Op, DP>(), kBatch = G == 4 ? 4 : 8, per_row = DP / G, groups = R * per_row;
  for (int c0 = 0; c0 < groups; c0 += kBatch * kThreads) {
    float x[kBatch][G];
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      const int c = c0 + k * kThreads + int(threadIdx.x), r = c / per_row, d = c % per_row * G, t = t0 + r;
      const bool in = c < groups && t < T && d < Dh;
      if constexpr (G == 4) load4(x[k], in ? src + int64_t(t) * rs + d : nullptr);
      else x[k][0] = in ? value_of(src[int64_t(t) * rs + d]) : 0.0f;
    }
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      const int c = c0 + k * kThreads + int(threadIdx.x), r = c / per_row, d = c % per_row * G;
      if (c < groups) {
        if constexpr (G == 4) put_operands4(dst + r * ld + d, x[k]);
        else dst[r * ld + d] = operand<Op>(x[k][0]);
      }
    }
  }
}
template <int R, int DP, class Op, class S>
__device__ __forceinline__ void load_rows(Op* dst, const S* src, int64_t rs, int t0, int T, int Dh, bool vec) {
  if (vec) load_rows_by<4, R, DP>(dst, src, rs, t0, T, Dh);
  else load_rows_by<1, R, DP>(dst, src, rs, t0, T, Dh);
}

// How the CTA's threads share the rows of a tile, Units units (16-byte chunks, or 4 elements) a row:
// thread tid takes unit tid % Units of rows tid / Units + k·kRowsPerPass, k = 0, 1, ... Its column is
// the same in every pass and every tile, so its addresses in a tile are its first row's plus constants
// (no division and no 64-bit product per unit, as a loop over units c = tid + k·kThreads has). Threads
// past kRowsPerPass·Units (head width 96: 12 or 24 units a row) idle: their r0 is past every tile.
template <int Units>
struct RowSplit {
  static constexpr int kRowsPerPass = kThreads / Units;
  static_assert(kRowsPerPass > 0, "a row has more units than the CTA has threads");
  int r0, col;  // first row (kThreads: idle), unit
  __device__ RowSplit()
      : r0(int(threadIdx.x) < kRowsPerPass * Units ? int(threadIdx.x) / Units : kThreads),
        col(int(threadIdx.x) % Units) {}
  template <int Rows>
  __host__ __device__ static constexpr int passes() { return (Rows + kRowsPerPass - 1) / kRowsPerPass; }
  // Whether pass k of this thread is a row of a Rows-row tile: known at compile time when every thread
  // takes a row in every pass (no test, no branch in the copy).
  template <int Rows>
  __device__ bool has(int k) const {
    return (kThreads % Units == 0 && Rows % kRowsPerPass == 0) || r0 + k * kRowsPerPass < Rows;
  }
};
template <class S, int DP>
using ChunkSplit = RowSplit<DP * int(sizeof(S)) / 16>;  // 16-byte chunks of a [.][DP] tile of S

// As load_rows, as cp.async of 16-byte chunks when `vec` (the view's rows 16-byte aligned, Dh a
// multiple of the chunk), the thread's share given by `split`; the caller commits the group.
template <int R, int DP, class S>
__device__ __forceinline__ void copy_rows(S* dst, const S* src, int64_t rs, int t0, int T, int Dh, bool vec,
                                          const ChunkSplit<S, DP>& split) {
  if (!vec) return load_rows<R, DP>(dst, src, rs, t0, T, Dh, false);
  constexpr int ld = ld_of<S, DP>(), E = 16 / int(sizeof(S)), kStep = ChunkSplit<S, DP>::kRowsPerPass;
  const int d = split.col * E, rows = d < Dh ? T - t0 - split.r0 : 0;  // pass k reads the view if k·kStep < rows
  const int64_t step = kStep * rs;
  const S* from = src + int64_t(t0 + split.r0) * rs + d;  // pass k's row (an address; read only when in)
  S* to = dst + split.r0 * ld + d;
#pragma unroll
  for (int k = 0; k < ChunkSplit<S, DP>::template passes<R>(); ++k, from += step)
    if (split.template has<R>(k)) {
      const bool in = k * kStep < rows;
      cp_async_cg_zfill(to + k * kStep * ld, in ? from : src, in ? 16u : 0u);
    }
}

// A kernel's stationary rows (staged once, before its first stream tile): by cp.async as a stream tile
// where the storage is the operand type and `vec` (landed by the first tile's commit and wait, so the
// two copies overlap), else by load_rows (converting, or rows not 16-byte aligned).
template <int R, int DP, class Op, class S>
__device__ __forceinline__ void stage_rows(Op* dst, const S* src, int64_t rs, int t0, int T, int Dh, bool vec) {
  if constexpr (std::is_same<Op, S>::value) copy_rows<R, DP>(dst, src, rs, t0, T, Dh, vec, ChunkSplit<S, DP>());
  else load_rows<R, DP>(dst, src, rs, t0, T, Dh, vec);
}

// rows x DP fp32 (stride ld_of<float>) to bf16 operands (stride ld_of<uint16_t>), 4 at a time.
template <int Rows, int DP>
__device__ __forceinline__ void convert_rows(uint16_t* dst, const float* src) {
  constexpr int lds = ld_of<float, DP>(), ldo = ld_of<uint16_t, DP>(), kStep = RowSplit<DP / 4>::kRowsPerPass;
  const RowSplit<DP / 4> split;
  const float* from = src + split.r0 * lds + split.col * 4;
  uint16_t* to = dst + split.r0 * ldo + split.col * 4;
#pragma unroll
  for (int k = 0; k < RowSplit<DP / 4>::template passes<Rows>(); ++k)
    if (split.template has<Rows>(k)) {
      const float4 x = *reinterpret_cast<const float4*>(from + k * kStep * lds);
      const int2 y = make_int2(int(pack_bf16x2(x.x, x.y)), int(pack_bf16x2(x.z, x.w)));
      *reinterpret_cast<int2*>(to + k * kStep * ldo) = y;
    }
}

// Shared memory of a PairStream of R-row tiles.
template <class Mma, class S, int DP>
__host__ __device__ constexpr size_t stream_bytes(int R) {
  return std::is_same<S, typename Mma::Op>::value ? 2 * 2 * tile_bytes<S, DP>(R)
                                                  : 2 * tile_bytes<S, DP>(R) + 2 * tile_bytes<typename Mma::Op, DP>(R);
}

// The widest stream tile the fp32 registers of a warp's 16 x R products allow beside its accumulators
// (the forward's two 16 x DP blocks, dK/dV's dK and dV) within 2 CTAs' share of the register file: 64 rows
// up to DP 64, 32 past it (no spills with nvcc 13 on sm_80/89/90: check_cuda.sh).
__host__ __device__ constexpr int widest_stream(int DP) { return DP <= 64 ? 64 : 32; }

// The stream's tile rows for a kernel with `stationary` rows of operand tiles (and `per_row` bytes more
// for each stream row: dK/dV's dS tile with atomic dQ): the largest of widest_stream(DP), half that, ...
// down to 16 whose shared memory fits kSmemMax.
template <class Mma, class S, int DP>
__host__ __device__ constexpr int stream_rows(int stationary, size_t per_row = 0) {
  const size_t fixed = tile_bytes<typename Mma::Op, DP>(stationary);
  for (int R = widest_stream(DP); R > 16; R /= 2)
    if (fixed + stream_bytes<Mma, S, DP>(R) + per_row * size_t(R) <= kSmemMax) return R;
  return 16;
}

template <class Mma, class S, int DP>
__host__ __device__ constexpr size_t kernel_smem(int stationary, size_t per_row = 0) {
  const int R = stream_rows<Mma, S, DP>(stationary, per_row);
  return tile_bytes<typename Mma::Op, DP>(stationary) + stream_bytes<Mma, S, DP>(R) + per_row * size_t(R);
}

// Two [T, Dh] head views (x and y: K and V, or Q and dO) streamed as [R][DP] operand tiles.
//   issue(0, ...); for n = 0, 1, ...: land(n); issue(n + 1, ...) if any; read tile(n, 0 | 1).
// land(n)'s first barrier is also where every warp is done with tile n - 1, whose buffers the next
// issue (and the conversion) reuse.
template <class Mma, class S, int R, int DP>
struct PairStream {
  using Op = typename Mma::Op;
  static constexpr bool kConvert = !std::is_same<S, Op>::value;
  static constexpr int kLdS = ld_of<S, DP>(), kLdOp = ld_of<Op, DP>();
  S* raw;  // kConvert: [x | y] one stage; else [stage][x | y]
  Op* op;  // kConvert: [x | y] operand tiles
  ChunkSplit<S, DP> split;  // this thread's chunks of a tile
  __device__ explicit PairStream(unsigned char* smem)
      : raw(reinterpret_cast<S*>(smem)), op(reinterpret_cast<Op*>(smem + 2 * tile_bytes<S, DP>(R))) {}

  __device__ void issue(int n, const S* x, int64_t rx, const S* y, int64_t ry, int t0, int T, int Dh, bool vec) {
    S* dst = raw + (kConvert ? 0 : (n & 1) * 2 * R * kLdS);
    copy_rows<R, DP>(dst, x, rx, t0, T, Dh, vec, split);
    copy_rows<R, DP>(dst + R * kLdS, y, ry, t0, T, Dh, vec, split);
    cp_async_commit();
  }
  __device__ void land(int n) {
    cp_async_wait<0>();
    __syncthreads();  // every thread's copies of tile n are in; every warp is done with tile n - 1
    if constexpr (kConvert) {
      static_assert(std::is_same<S, float>::value && std::is_same<Op, uint16_t>::value, "converts fp32 to bf16");
      convert_rows<2 * R, DP>(op, raw);
      __syncthreads();  // the operand tiles are complete
    }
  }
  __device__ const Op* tile(int n, int which) const {
    if constexpr (kConvert) return op + which * R * kLdOp;
    else return raw + ((n & 1) * 2 + which) * R * kLdS;
  }
};

// Whether any pair of queries [q0, q1) x keys [k0, k1) may be blocked (else no per-pair test).
// Query rows past Tq need no test: their Q rows are zeros (finite scores), the forward and dQ never
// write them, and the dK/dV pass gives them P = 0 through their lse (lse2: +inf past Tq).
__device__ __forceinline__ bool tile_check(const CoreArgs& a, int q0, int q1, int k0, int k1) {
  return a.key_padding_mask || a.attn_mask || k1 > a.Tk || (a.causal && k1 - 1 > q0);
}

// Whether a warp whose queries are [q0, q1) skips the products of the key tile from k0 on: its queries
// are all padding (past Tq: nothing of them is stored), or causality blocks every pair (each key after
// each query: P = 0, the tile adds nothing). It still takes part in the tile's copies and barriers.
__device__ __forceinline__ bool idle(const CoreArgs& a, int q0, int q1, int k0) {
  return q0 >= a.Tq || (a.causal && k0 > q1 - 1);
}

// Where a stream's whole tiles end: of its tiles of R rows from `first` up to `end`, the start of the last
// one when its live rows fit in kShortTile (it runs short, after the loop of whole tiles), else `end`.
template <int R>
__device__ __forceinline__ int whole_tiles_end(int first, int end) {
  const int last = end - 1 - (end - 1 - first) % R;
  return end > first && end - last <= kShortTile ? last : end;
}

// Blocks the pairs of a tile that tile_check flagged: s[m][t][e], of row r (0 .. 16 MB - 1) and column c
// of the warp's MB 16 x 8N product, is the pair (query, key) = (row0 + r, col0 + c), or (col0 + c, row0 + r)
// where kKeyRows (dK/dV's Sᵀ); a blocked pair gets `blocked`. With a mask tensor every pair is tested
// (is_blocked); without, only the key count and the causal band block pairs: each row's limits once, two
// compares a score. (Rows past Tq, and Sᵀ's columns past Tq or rows past Tk, need no test: tile_check.)
template <bool kKeyRows, int MB, int N>
__device__ __forceinline__ void mask_tile(float (&s)[MB][N][4], const CoreArgs& a, int64_t b, int lane, int row0,
                                          int col0, float blocked) {
  if (a.key_padding_mask || a.attn_mask) {
    for_each_acc(s, lane, [&](float& x, int r, int c) {
      if (kKeyRows ? is_blocked(a, b, col0 + c, row0 + r) : is_blocked(a, b, row0 + r, col0 + c)) x = blocked;
    });
    return;
  }
  if (kKeyRows && !a.causal) return;  // (Sᵀ's keys past Tk and queries past Tq need no test)
#pragma unroll
  for (int m = 0; m < MB; ++m)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = row0 + m * kWarpRows + acc_row(lane, 2 * half);
      // kept columns [lo, hi): keys below the key count (and up to the query where causal), or, in Sᵀ,
      // queries from the key on
      const int lo = kKeyRows ? row - col0 : -col0;
      const int hi = kKeyRows ? INT_MAX : (a.causal && row < a.Tk ? row + 1 : a.Tk) - col0;
#pragma unroll
      for (int t = 0; t < N; ++t)
#pragma unroll
        for (int e = 2 * half; e < 2 * half + 2; ++e) {
          const int c = acc_col(lane, t, e);
          if (c < lo || c >= hi) s[m][t][e] = blocked;
        }
    }
}

// Stores a warp's MB 16 x DP accumulator blocks, row (m, half) of the lane times f[m][half], as rows of
// an output: the warp's row r (0 .. 16 MB - 1) is row row0 + r of the head view at `head` (rows `rs`
// apart, head_rows), not stored from row T on; columns past Dh are not stored; two adjacent columns a
// store where the row is aligned for it.
template <int MB, int DT, class O>
__device__ __forceinline__ void store_rows(const float (&acc)[MB][DT][4], const float (&f)[MB][2], int lane, int Dh,
                                           O* head, int64_t rs, int row0, int T) {
#pragma unroll
  for (int m = 0; m < MB; ++m)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = row0 + m * kWarpRows + acc_row(lane, 2 * half);
      if (row >= T) continue;
      O* p = head + row * rs;
      const bool pairs = Dh % 2 == 0 && reinterpret_cast<uintptr_t>(p) % (2 * sizeof(O)) == 0;
#pragma unroll
      for (int dt = 0; dt < DT; ++dt) {
        const int d = acc_col(lane, dt, 0);
        if (d >= Dh) continue;
        const float x0 = acc[m][dt][2 * half] * f[m][half], x1 = acc[m][dt][2 * half + 1] * f[m][half];
        if (pairs) {
          put2(p + d, x0, x1);
        } else {
          put(p + d, x0);
          if (d + 1 < Dh) put(p + d + 1, x1);
        }
      }
    }
}

// The largest of each row half's scores in a warp's 16 x 8N block s (half 0: elements 0, 1; half 1:
// 2, 3 of each n8 tile), this lane's columns: a tree of fmaxf (depth log2 2N, not a chain of 2N).
template <int N>
__device__ __forceinline__ float lane_row_max(const float (&s)[N][4], int half) {
  float v[N];
#pragma unroll
  for (int t = 0; t < N; ++t) v[t] = fmaxf(s[t][2 * half], s[t][2 * half + 1]);
#pragma unroll
  for (int w = 1; w < N; w *= 2)
#pragma unroll
    for (int t = 0; t + w < N; t += 2 * w) v[t] = fmaxf(v[t], v[t + w]);
  return v[0];
}

// Whether a kernel can stream the views by cp.async (16-byte chunks of S).
template <class S>
bool vector_views(std::initializer_list<std::pair<const S*, ops::AttentionLayout>> views, int Dh) {
  constexpr int E = 16 / int(sizeof(S));
  bool ok = Dh % E == 0;
  for (const auto& [p, l] : views)
    ok = ok && reinterpret_cast<uintptr_t>(p) % 16 == 0 && l.batch % E == 0 && l.row % E == 0 && l.head % E == 0;
  return ok;
}

// Runs f(std::integral_constant<int, DP>) for the padded width of Dh.
template <class F>
auto with_padded_width(int Dh, F f) {
  switch (padded_width(Dh)) {
    case 32: return f(std::integral_constant<int, 32>());
    case 64: return f(std::integral_constant<int, 64>());
    case 96: return f(std::integral_constant<int, 96>());
    default: return f(std::integral_constant<int, 128>());
  }
}

// Runs f(std::bool_constant<dropout>): the kernels are instantiated with and without attention
// dropout, so the common kernel carries no Philox code (inlined per score, it overflowed the
// instruction cache: on an H200 the forward's warps stalled on instruction fetch 56% of the time).
template <class F>
auto with_dropout(bool dropout, F f) {
  return dropout ? f(std::true_type()) : f(std::false_type());
}

}  // namespace nf::cuda::flash
