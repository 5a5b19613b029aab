// Internal to flash_attention_backward.cu and flash_attention_dq_atomic.cu: the backward's tiles and its
// dK/dV kernel (with or without atomic dQ), which both files instantiate (the atomic instantiations in a
// file of their own, so that nvcc compiles the two halves in parallel). Math, layout and kernels: the
// header of flash_attention_backward.cu.
#pragma once
#include "flash_attention.cuh"

namespace nf::cuda {

// Atomic dQ (flash_attention_dq_atomic.cu): the dK/dV kernel with the dQ product into a zeroed fp32 buffer,
// then the store pass into dq; *ran false, with nothing launched, with attention dropout or where the dS
// tile does not fit beside the kernel's tiles (atomic_dq_fits): the caller then runs the recompute pass.
namespace flash {
template <class Mma, class S, class O>
Status launch_atomic_dq(O* dq, O* dk, O* dv, const ops::AttentionLayout& ldk, const ops::AttentionLayout& ldv,
                        const S* dout, const float* lse, const float* di, const S* q, const S* k, const S* v,
                        const CoreArgs& a, bool vec, cudaStream_t s, bool* ran);
}  // namespace flash

namespace {

using namespace flash;

// lse in the log2 domain (+inf for a fully blocked or padded row: then every P is 0).
__device__ __forceinline__ float lse2(const float* lse, int64_t row0, int i, int Tq) {
  const float L = i < Tq ? lse[row0 + i] : -INFINITY;
  return L == -INFINITY ? INFINITY : L * kLog2e;
}

// A backward CTA's shared memory: two stationary [64][DP] operand tiles, rows [t0, t0 + 64) of the
// head views x and y (K and V, or Q and dO), loaded at construction, then the stream of the other two.
// The 16-byte pad that ends each stationary row (ldmatrix and the fragment reads stop at DP) holds 4
// fp32 slots: pad(k) is slot k % 4 of row k / 4 (512 slots; StreamedRowStats uses 4 R of them).
template <class Op, int DP>
__host__ __device__ constexpr int pad_stride() {  // floats from one row's pad to the next
  return ld_of<Op, DP>() * int(sizeof(Op)) / 4;
}
template <class Mma, class S, int R, int DP>
struct BackwardTiles {
  using Op = typename Mma::Op;
  Op* x;
  Op* y;
  PairStream<Mma, S, R, DP> stream;
  __device__ BackwardTiles(unsigned char* smem, const S* xh, int64_t rx, const S* yh, int64_t ry, int t0, int T, int Dh,
                           bool vec)
      : x(reinterpret_cast<Op*>(smem)),
        y(x + kBlockRows * ld_of<Op, DP>()),
        stream(smem + 2 * tile_bytes<Op, DP>(kBlockRows)) {
    stage_rows<kBlockRows, DP>(x, xh, rx, t0, T, Dh, vec);  // (landed with the first stream tile)
    stage_rows<kBlockRows, DP>(y, yh, ry, t0, T, Dh, vec);
  }
  __device__ float* pad(int k) const {
    return reinterpret_cast<float*>(x + DP) + (k >> 2) * pad_stride<Op, DP>() + (k & 3);
  }
};

// The dK/dV pass's per-query values of a streamed tile, lse2 and Di of its R rows (every lane reads R / 8
// pairs of each a tile), staged in shared memory instead of each lane reading them from global memory:
// fetch(i0), with the issue of the tile at i0, loads thread t's value into a register (t < R: lse2 of
// row i0 + t; R <= t < 2R: Di of row i0 + t - R, 0 past Tq), put(n) stores it before tile n's land barrier
// (stage n & 1 of two, slots [2R (n & 1), 2R (n & 1) + 2R) of the pads: the stage was last read in
// tile n - 2, before tile n - 1's barrier); lse2_at(n, t) and di_at(n, t) give the lane's columns
// 2 (lane % 4) and 2 (lane % 4) + 1 of n8 tile t.
template <class Mma, class S, int R, int DP>
struct StreamedRowStats {
  using Tiles = BackwardTiles<Mma, S, R, DP>;
  float value = 0.0f;
  const float* lane_pad;  // the lane's first slot in stage 0
  __device__ StreamedRowStats(const Tiles& tiles, int lane) : lane_pad(tiles.pad(2 * (lane & 3))) {}
  __device__ void fetch(const float* lse, const float* di, int64_t row0, int i0, int Tq) {
    const int t = int(threadIdx.x), i = i0 + (t < R ? t : t - R);
    if (t < R) value = lse2(lse, row0, i, Tq);
    else if (t < 2 * R) value = i < Tq ? di[row0 + i] : 0.0f;
  }
  __device__ void put(const Tiles& tiles, int n) const {
    if (int(threadIdx.x) < 2 * R) *tiles.pad((n & 1) * 2 * R + int(threadIdx.x)) = value;
  }
  __device__ float2 lse2_at(int n, int t) const { return at((n & 1) * 2 * R + 8 * t); }
  __device__ float2 di_at(int n, int t) const { return at((n & 1) * 2 * R + R + 8 * t); }

 private:
  __device__ float2 at(int k) const {  // slots k + 2 (lane % 4), +1 (k a multiple of 4)
    return *reinterpret_cast<const float2*>(lane_pad + (k >> 2) * pad_stride<typename Mma::Op, DP>());
  }
};

// The dK/dV kernel's stream rows, and its shared dS tile's row ([kBlockRows] operands plus the pad)
// with atomic dQ.
template <class Mma, bool kAtomicDq>
__host__ __device__ constexpr size_t ds_row_bytes() {
  using Op = typename Mma::Op;
  return kAtomicDq ? sizeof(Op) * size_t(ld_of<Op, kBlockRows>()) : 0;
}
template <class Mma, class S, int DP, bool kAtomicDq>
__host__ __device__ constexpr int dkdv_rows() {
  return stream_rows<Mma, S, DP>(2 * kBlockRows, ds_row_bytes<Mma, kAtomicDq>());
}
template <class Mma, class S, int DP, bool kAtomicDq>
__host__ __device__ constexpr size_t dkdv_smem() {
  return kernel_smem<Mma, S, DP>(2 * kBlockRows, ds_row_bytes<Mma, kAtomicDq>());
}
// Whether atomic dQ's dS tile fits beside the dK/dV kernel's tiles (not at fp32 storage with tf32
// operands past head width 96: there the stream is already 16 rows).
template <class Mma, class S, int DP>
constexpr bool atomic_dq_fits() {
  return dkdv_smem<Mma, S, DP, true>() <= kSmemMax;
}

// Atomic dQ, one streamed tile of R queries (rows i0..): ds holds the CTA's dS of the tile as [R][64 keys]
// operands, K its stationary [64][DP] key tile; warp w takes the 16-row by 32-column units u = w, w + 4,
// ... (row block u % (R / 16), columns 32 (u / (R / 16)): the same row block for every unit of a warp),
// adds dS K over the 64 keys into acc_dq (the head's [Tq][Dh] fp32 rows) with atomicAdd, rows past Tq
// and columns past Dh left out.
template <class Mma, int R, int DP>
__device__ __forceinline__ void add_dq_tile(float* acc_dq, const typename Mma::Op* ds, const typename Mma::Op* K,
                                            int i0, int Tq, int Dh, int warp, int lane) {
  using Op = typename Mma::Op;
  constexpr int RB = R / kWarpRows, units = RB * (DP / 32), lds = ld_of<Op, kBlockRows>(), ldk = ld_of<Op, DP>();
  for (int u = warp; u < units; u += kWarps) {
    const int r0 = u % RB * kWarpRows, c0 = u / RB * 32;
    float acc[4][4] = {};
    mma_ab<Mma, kBlockRows, 4>(acc, ds + r0 * lds, lds, K + c0, ldk, lane);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = i0 + r0 + acc_row(lane, e);
      if (i >= Tq) continue;
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        const int d = c0 + acc_col(lane, t, e);
        if (d < Dh) atomicAdd(acc_dq + int64_t(i) * Dh + d, acc[t][e]);
      }
    }
  }
}

// One streamed tile of R queries from i0 (Q tile qt, dO tile gt; with R = kShortTile < RS, the stream's
// rows, their first rows) for the warp's keys jw.. (K rows kw, V rows vw; the tile's lse2 and Di in stats):
// Sᵀ, dPᵀ, Pᵀ and dSᵀ (left in dp), dV += (P ∘ Z)ᵀ dO and dK += dSᵀ Q.
template <class Mma, class S, int R, int RS, int DP, bool kDropout>
__device__ __forceinline__ void dkdv_tile(float (&dp)[1][R / 8][4], float (&acc_k)[1][DP / 8][4],
                                          float (&acc_v)[1][DP / 8][4], const typename Mma::Op* kw,
                                          const typename Mma::Op* vw, const typename Mma::Op* qt,
                                          const typename Mma::Op* gt, const StreamedRowStats<Mma, S, RS, DP>& stats,
                                          int n, const CoreArgs& a, int64_t b, int64_t h, int lane, int jw, int i0) {
  constexpr int N = R / 8;
  const float c = a.scale * kLog2e;
  float s[1][N][4] = {};  // Sᵀ, then Pᵀ
  mma_abt<Mma, 1, R, DP>(s, kw, qt, lane);
  mma_abt<Mma, 1, R, DP>(dp, vw, gt, lane);
#pragma unroll
  for (int t = 0; t < N; ++t) {
    const float2 L = stats.lse2_at(n, t);
#pragma unroll
    for (int e = 0; e < 4; ++e) s[0][t][e] = exp2_ftz(s[0][t][e] * c - (e & 1 ? L.y : L.x));  // P
  }
  if (tile_check(a, i0, i0 + R, jw, jw + kWarpRows))  // else no pair of the tile is blocked
    mask_tile<true>(s, a, b, lane, jw, i0, 0.0f);
#pragma unroll
  for (int t = 0; t < N; ++t) {
    const float2 D = stats.di_at(n, t);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = i0 + acc_col(lane, t, e), j = jw + acc_row(lane, e);
      const float p = s[0][t][e], Di = e & 1 ? D.y : D.x;
      const float z = kDropout && p != 0.0f ? keep_scale(a, b, h, i, j) : 1.0f;
      s[0][t][e] = p * z;
      dp[0][t][e] = p * (z * dp[0][t][e] - Di);
    }
  }
  mma_pb<Mma, 1, R, DP>(acc_v, s, gt, lane);
  mma_pb<Mma, 1, R, DP>(acc_k, dp, qt, lane);
}

template <class Mma, class S, class O, int DP, bool kDropout, bool kAtomicDq>
__global__ void __launch_bounds__(kThreads, 2)
    flash_dkdv_kernel(O* dk, O* dv, float* acc_dq, ops::AttentionLayout ldk, ops::AttentionLayout ldv, const S* q,
                      const S* k, const S* v, const S* dout, const float* lse, const float* di, CoreArgs a, bool vec) {
  using Op = typename Mma::Op;
  constexpr int R = dkdv_rows<Mma, S, DP, kAtomicDq>();
  constexpr int N = R / 8, DT = DP / 8, ld = ld_of<Op, DP>(), lds = ld_of<Op, kBlockRows>();
  NF_DYNAMIC_SHARED(unsigned char, smem);
  const int lane = int(threadIdx.x) % kWarp, warp = int(threadIdx.x) / kWarp;
  const int64_t b = blockIdx.z, h = blockIdx.y, row0 = (b * a.H + h) * a.Tq;
  const int j0 = int(blockIdx.x) * kBlockRows, jw = j0 + warp * kWarpRows;
  BackwardTiles<Mma, S, R, DP> kv(smem, head_rows(k, a.lk, b, h), a.lk.row, head_rows(v, a.lv, b, h), a.lv.row, j0,
                                  a.Tk, a.Dh, vec);
  PairStream<Mma, S, R, DP>& qdo = kv.stream;
  // (kAtomicDq) the dS tile, past the stream
  Op* ds = reinterpret_cast<Op*>(smem + 2 * tile_bytes<Op, DP>(kBlockRows) + stream_bytes<Mma, S, DP>(R));
  const S* qh = head_rows(q, a.lq, b, h);
  const S* gh = head_rows(dout, a.lo, b, h);
  const int i_start = a.causal ? j0 : 0;  // earlier queries see none of these keys
  StreamedRowStats<Mma, S, R, DP> stats(kv, lane);
  if (i_start < a.Tq) {
    qdo.issue(0, qh, a.lq.row, gh, a.lo.row, i_start, a.Tq, a.Dh, vec);
    stats.fetch(lse, di, row0, i_start, a.Tq);
  }

  float acc_k[1][DT][4] = {}, acc_v[1][DT][4] = {};
  // Whole tiles, then (short, not with atomic dQ) a last tile whose live queries all lie in its first
  // kShortTile rows.
  const Op *kw = kv.x + warp * kWarpRows * ld, *vw = kv.y + warp * kWarpRows * ld;
  constexpr bool kShort = has_short_tile<R, DP>() && !kAtomicDq;
  const int whole_end = kShort ? whole_tiles_end<R>(i_start, a.Tq) : a.Tq;
  int n = 0, i0 = i_start;
  for (; i0 < whole_end; ++n, i0 += R) {
    stats.put(kv, n);
    qdo.land(n);
    if (i0 + R < a.Tq) {
      qdo.issue(n + 1, qh, a.lq.row, gh, a.lo.row, i0 + R, a.Tq, a.Dh, vec);
      stats.fetch(lse, di, row0, i0 + R, a.Tq);
    }
    // A warp whose keys are all padding only helps with the copies (and, with atomic dQ, gives zeros
    // for its dS columns and takes its units of the dQ product).
    float dp[1][N][4] = {};  // dPᵀ, then dSᵀ: the warp's 16 keys x R queries
    if (jw < a.Tk)
      dkdv_tile<Mma, S, R, R, DP, kDropout>(dp, acc_k, acc_v, kw, vw, qdo.tile(n, 0), qdo.tile(n, 1), stats, n, a, b, h,
                                            lane, jw, i0);
    if constexpr (kAtomicDq) {  // dSᵀ into the dS tile as dS (query rows), then dQ += dS K
      for_each_acc(dp, lane, [&](float x, int r, int col) { ds[col * lds + warp * kWarpRows + r] = operand<Op>(x); });
      __syncthreads();  // the tile's dS is complete (the next tile's writes come after its land barrier)
      add_dq_tile<Mma, R, DP>(acc_dq + row0 * a.Dh, ds, kv.x, i0, a.Tq, a.Dh, warp, lane);
    }
  }
  if constexpr (kShort) {
    if (i0 < a.Tq) {
      stats.put(kv, n);
      qdo.land(n);
      float dp[1][kShortTile / 8][4] = {};
      if (jw < a.Tk)
        dkdv_tile<Mma, S, kShortTile, R, DP, kDropout>(dp, acc_k, acc_v, kw, vw, qdo.tile(n, 0), qdo.tile(n, 1), stats,
                                                       n, a, b, h, lane, jw, i0);
    }
  }
  const float scale[1][2] = {{a.scale, a.scale}}, one[1][2] = {{1.0f, 1.0f}};
  store_rows(acc_k, scale, lane, a.Dh, head_rows(dk, ldk, b, h), ldk.row, jw, a.Tk);
  store_rows(acc_v, one, lane, a.Dh, head_rows(dv, ldv, b, h), ldv.row, jw, a.Tk);
}

}  // namespace

}  // namespace nf::cuda
