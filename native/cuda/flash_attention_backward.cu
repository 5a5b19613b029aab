// Attention backward on tensor cores ('bf16': mma.sync m16n8k16; 'tf32': m16n8k8; 'fp32': m16n8k8 by
// the 3xTF32 split), FlashAttention-2's
// algorithm with the tile machinery of flash_attention.cuh.
// Math (per batch b and head h; P recomputed from Q, K and the forward's lse; Z the dropout mask
// scaled by 1/(1-p); Di = rowsum(dO ∘ O), computed by attention.cu's Di kernel):
//   dV = (P ∘ Z)ᵀ dO;  dP = dO Vᵀ;  dS = P ∘ (Z ∘ dP − Di);  dK = scale dSᵀ Q;  dQ = scale dS K.
// Layout: Q, K, V, dO and the gradients [B, T, H, Dh] views (ops::AttentionLayout); lse, Di [B, H, Tq].
// Dimension key: B batch, H heads, Tq/Tk query/key lengths, Dh head width, DP padded width, R rows
// per streamed tile.
// Kernels (4 warps, 16 stationary rows each, products as in the forward):
//   dK/dV: a CTA per 64 keys of one (b, h) (K, V stationary), streaming Q and dO tiles: a warp
//     computes Sᵀ = K Qᵀ and dPᵀ = V dOᵀ (16 keys x R queries), Pᵀ and dSᵀ from them in registers,
//     then dV += (P ∘ Z)ᵀ dO and dK += dSᵀ Q from those registers (mma_pb); dK, dV stay in registers
//     for the whole pass and are written once. Each tile's lse and Di ride the stream into shared memory
//     (StreamedRowStats: one global load per row, not one per lane and score). Causal: query tiles before
//     the CTA's first key are not visited.
//   dQ: a CTA per 64 queries (Q, dO stationary), streaming K and V: S = Q Kᵀ, dP = dO Vᵀ, dS, and
//     dQ += dS K, written once.
// dQ, two ways (attention_dq(): NF_CUDA_ATTENTION_DQ, default 'recompute'):
//   recompute (the default): the dQ kernel above, a second pass that recomputes S and dP: 7 products
//     per (query, key) tile pair instead of FlashAttention-2's 5, i.e. 1.4x the backward's tensor
//     FLOPs, and deterministic like every other kernel of this backend (a bf16 training step gives the
//     same bits on every run, so it can be compared with itself and reproduced from a seed).
//   atomic (FlashAttention-2's): the dK/dV kernel also forms dQ += dS K for each tile it streams: its
//     warps' dSᵀ go to a shared [R queries][64 keys] tile (transposed as stored), then each warp
//     multiplies 16-row by 32-column units of dS by the stationary K tile and adds them into an fp32
//     [B, H, Tq, Dh] accumulator (workspace slot 1, zeroed first) with atomicAdd (red.global.add.f32);
//     a last pass scales it and stores dQ. No dQ kernel, no recomputed S and dP, but a barrier more a
//     tile, Tk / 64 atomic adds per dQ element, and fp32 sums in arrival order: dQ (and so dx and the
//     weight gradients) may differ in the last bits from run to run. Where the dS tile does not fit
//     the shared memory (fp32 storage at 'tf32' and 'fp32' with head widths over 96) the recompute
//     pass runs instead. Which is faster is a GPU measurement (bench/gpu/attention_run.sh runs both).
#include "flash_attention.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "flash_attention.cuh"

namespace nf::cuda {

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

  const float c = a.scale * kLog2e;
  float acc_k[1][DT][4] = {}, acc_v[1][DT][4] = {};
  for (int n = 0, i0 = i_start; i0 < a.Tq; ++n, i0 += R) {
    stats.put(kv, n);
    qdo.land(n);
    if (i0 + R < a.Tq) {
      qdo.issue(n + 1, qh, a.lq.row, gh, a.lo.row, i0 + R, a.Tq, a.Dh, vec);
      stats.fetch(lse, di, row0, i0 + R, a.Tq);
    }
    // A warp whose keys are all padding only helps with the copies (and, with atomic dQ, gives zeros
    // for its dS columns and takes its units of the dQ product).
    float dp[1][N][4] = {};  // dPᵀ, then dSᵀ: the warp's 16 keys x R queries
    if (jw < a.Tk) {
      float s[1][N][4] = {};  // Sᵀ, then Pᵀ
      mma_abt<Mma, 1, R, DP>(s, kv.x + warp * kWarpRows * ld, qdo.tile(n, 0), lane);
      mma_abt<Mma, 1, R, DP>(dp, kv.y + warp * kWarpRows * ld, qdo.tile(n, 1), lane);
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
      mma_pb<Mma, 1, R, DP>(acc_v, s, qdo.tile(n, 1), lane);
      mma_pb<Mma, 1, R, DP>(acc_k, dp, qdo.tile(n, 0), lane);
    }
    if constexpr (kAtomicDq) {  // dSᵀ into the dS tile as dS (query rows), then dQ += dS K
      for_each_acc(dp, lane, [&](float x, int r, int col) { ds[col * lds + warp * kWarpRows + r] = operand<Op>(x); });
      __syncthreads();  // the tile's dS is complete (the next tile's writes come after its land barrier)
      add_dq_tile<Mma, R, DP>(acc_dq + row0 * a.Dh, ds, kv.x, i0, a.Tq, a.Dh, warp, lane);
    }
  }
  const float scale[1][2] = {{a.scale, a.scale}}, one[1][2] = {{1.0f, 1.0f}};
  store_rows(acc_k, scale, lane, a.Dh, head_rows(dk, ldk, b, h), ldk.row, jw, a.Tk);
  store_rows(acc_v, one, lane, a.Dh, head_rows(dv, ldv, b, h), ldv.row, jw, a.Tk);
}

// Atomic dQ's last pass: dq = scale acc_dq, each element of the [B, H, Tq, Dh] accumulator into the view.
template <class O>
__global__ void __launch_bounds__(kThreads) flash_dq_store_kernel(O* dq, const float* acc_dq, CoreArgs a) {
  const int64_t n = int64_t(a.B) * a.H * a.Tq * a.Dh;
  for (int64_t x = int64_t(blockIdx.x) * kThreads + threadIdx.x; x < n; x += int64_t(gridDim.x) * kThreads) {
    const int64_t row = x / a.Dh, bh = row / a.Tq;
    const int d = int(x - row * a.Dh), i = int(row - bh * a.Tq);
    put(head_rows(dq, a.lq, bh / a.H, bh % a.H) + int64_t(i) * a.lq.row + d, a.scale * acc_dq[x]);
  }
}

// dQ holds one 16 x DP accumulator a warp (dK/dV two): without dropout its registers fit 3 CTAs an SM
// (168 a thread, no spills on sm_80/89/90), 12 warps to hide its latencies where shared memory allows
// (Dh 64: 3 x 54 KB of bf16 tiles on an H100/H200's 227 KB); the dropout instantiations would spill
// (8-20 bytes on sm_80/89) and keep 2.
__host__ __device__ constexpr int dq_ctas_per_sm(bool dropout) { return dropout ? 2 : 3; }

template <class Mma, class S, class O, int DP, bool kDropout>
__global__ void __launch_bounds__(kThreads, dq_ctas_per_sm(kDropout))
    flash_dq_kernel(O* dq, const S* q, const S* k, const S* v, const S* dout, const float* lse, const float* di,
                    CoreArgs a, bool vec) {
  using Op = typename Mma::Op;
  constexpr int R = stream_rows<Mma, S, DP>(2 * kBlockRows);
  constexpr int N = R / 8, DT = DP / 8, ld = ld_of<Op, DP>();
  NF_DYNAMIC_SHARED(unsigned char, smem);
  const int lane = int(threadIdx.x) % kWarp, warp = int(threadIdx.x) / kWarp;
  const int64_t b = blockIdx.z, h = blockIdx.y, row0 = (b * a.H + h) * a.Tq;
  const int i0 = int(blockIdx.x) * kBlockRows, iw = i0 + warp * kWarpRows;
  BackwardTiles<Mma, S, R, DP> qdo(smem, head_rows(q, a.lq, b, h), a.lq.row, head_rows(dout, a.lo, b, h), a.lo.row, i0,
                                   a.Tq, a.Dh, vec);
  PairStream<Mma, S, R, DP>& kv = qdo.stream;
  const S* kh = head_rows(k, a.lk, b, h);
  const S* vh = head_rows(v, a.lv, b, h);
  const int key_end = a.causal && i0 + kBlockRows < a.Tk ? i0 + kBlockRows : a.Tk;
  if (key_end > 0) kv.issue(0, kh, a.lk.row, vh, a.lv.row, 0, a.Tk, a.Dh, vec);

  const float c = a.scale * kLog2e;
  float L[2], Di[2], acc[1][DT][4] = {};
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int i = iw + acc_row(lane, 2 * r);
    L[r] = lse2(lse, row0, i, a.Tq);
    Di[r] = i < a.Tq ? di[row0 + i] : 0.0f;
  }
  for (int n = 0, j0 = 0; j0 < key_end; ++n, j0 += R) {
    kv.land(n);
    if (j0 + R < key_end) kv.issue(n + 1, kh, a.lk.row, vh, a.lv.row, j0 + R, a.Tk, a.Dh, vec);
    if (idle(a, iw, iw + kWarpRows, j0)) continue;
    float s[1][N][4] = {}, dp[1][N][4] = {};
    mma_abt<Mma, 1, R, DP>(s, qdo.x + warp * kWarpRows * ld, kv.tile(n, 0), lane);
    mma_abt<Mma, 1, R, DP>(dp, qdo.y + warp * kWarpRows * ld, kv.tile(n, 1), lane);
#pragma unroll
    for (int t = 0; t < N; ++t)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[0][t][e] = exp2_ftz(s[0][t][e] * c - L[e >> 1]);  // P
    if (tile_check(a, iw, iw + kWarpRows, j0, j0 + R))  // else no pair of the tile is blocked
      mask_tile<false>(s, a, b, lane, iw, j0, 0.0f);
#pragma unroll
    for (int t = 0; t < N; ++t)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = iw + acc_row(lane, e), j = j0 + acc_col(lane, t, e);
        const float p = s[0][t][e];
        const float z = kDropout && p != 0.0f ? keep_scale(a, b, h, i, j) : 1.0f;
        s[0][t][e] = p * (z * dp[0][t][e] - Di[e >> 1]);  // dS
      }
    mma_pb<Mma, 1, R, DP>(acc, s, kv.tile(n, 0), lane);
  }
  const float scale[1][2] = {{a.scale, a.scale}};
  store_rows(acc, scale, lane, a.Dh, head_rows(dq, a.lq, b, h), a.lq.row, iw, a.Tq);
}

// NF_CUDA_ATTENTION_DQ: 'atomic' or 'recompute' (unset or empty: recompute); another value is an error.
Status dq_from_env(AttentionDq* mode) {
  const char* v = std::getenv("NF_CUDA_ATTENTION_DQ");
  if (!v || !*v || !std::strcmp(v, "recompute")) *mode = AttentionDq::recompute;
  else if (!std::strcmp(v, "atomic")) *mode = AttentionDq::atomic;
  else
    return Status::InvalidArg("attention_backward",
                              std::string("NF_CUDA_ATTENTION_DQ must be 'atomic' or 'recompute', not '") + v + "'");
  return Status::Ok();
}

// The process's choice: from the environment at first use, until set_attention_dq.
struct DqChoice {
  AttentionDq mode = AttentionDq::recompute;
  Status env = dq_from_env(&mode);
};
DqChoice& dq_choice() {
  static DqChoice c;
  return c;
}

// From q, k, v, dout of storage S (layouts a.lq, a.lk, a.lv, a.lo) into dq, dk, dv of storage O.
template <class Mma, class S, class O>
Status launch_backward(O* dq, O* dk, O* dv, const ops::AttentionLayout& ldk, const ops::AttentionLayout& ldv,
                       const S* dout, const float* lse, const float* di, const S* q, const S* k, const S* v,
                       const CoreArgs& a, cudaStream_t s) {
  const char* op = "flash_attention_backward";
  AttentionDq mode;
  NF_TRY(attention_dq(&mode));
  const bool vec = vector_views<S>({{q, a.lq}, {k, a.lk}, {v, a.lv}, {dout, a.lo}}, a.Dh);
  return with_padded_width(a.Dh, [&](auto dp) -> Status {
    return with_dropout(a.p > 0.0f, [&](auto dropout) -> Status {
      constexpr int DP = decltype(dp)::value;
      constexpr bool kDropout = decltype(dropout)::value;
      const dim3 keys(unsigned(ceil_div(a.Tk, kBlockRows)), unsigned(a.H), unsigned(a.B));
      if constexpr (atomic_dq_fits<Mma, S, DP>()) {
        if (mode == AttentionDq::atomic) {
          const size_t n = size_t(a.B) * size_t(a.H) * size_t(a.Tq) * size_t(a.Dh);
          void* acc = nullptr;
          NF_TRY(workspace(1, sizeof(float) * n, &acc));
          NF_CUDA_TRY(op, cudaMemsetAsync(acc, 0, sizeof(float) * n, s));
          NF_CUDA_TRY(op, launch(flash_dkdv_kernel<Mma, S, O, DP, kDropout, true>, keys, dim3(kThreads),
                                 dkdv_smem<Mma, S, DP, true>(), s, dk, dv, static_cast<float*>(acc), ldk, ldv, q, k,
                                 v, dout, lse, di, a, vec));
          const unsigned blocks = unsigned(std::min<int64_t>(ceil_div(int64_t(n), kThreads), 65535));
          NF_CUDA_TRY(op, launch(flash_dq_store_kernel<O>, dim3(blocks), dim3(kThreads), 0, s, dq,
                                 static_cast<const float*>(acc), a));
          return Status::Ok();
        }
      }
      const dim3 queries(unsigned(ceil_div(a.Tq, kBlockRows)), unsigned(a.H), unsigned(a.B));
      NF_CUDA_TRY(op, launch(flash_dkdv_kernel<Mma, S, O, DP, kDropout, false>, keys, dim3(kThreads),
                             dkdv_smem<Mma, S, DP, false>(), s, dk, dv, nullptr, ldk, ldv, q, k, v, dout, lse, di,
                             a, vec));
      NF_CUDA_TRY(op, launch(flash_dq_kernel<Mma, S, O, DP, kDropout>, queries, dim3(kThreads),
                             kernel_smem<Mma, S, DP>(2 * kBlockRows), s, dq, q, k, v, dout, lse, di,
                             a, vec));
      return Status::Ok();
    });
  });
}

}  // namespace

Status attention_dq(AttentionDq* mode) {
  const DqChoice& c = dq_choice();
  NF_TRY(c.env);
  *mode = c.mode;
  return Status::Ok();
}

void set_attention_dq(AttentionDq mode) {
  DqChoice& c = dq_choice();
  c.mode = mode;
  c.env = Status::Ok();
}

Status flash_attention_backward(float* dq, float* dk, float* dv, const ops::AttentionLayout& ldk,
                                const ops::AttentionLayout& ldv, const float* dout, const float* lse, const float* di,
                                const CoreArgs& a, ops::Precision precision, cudaStream_t s) {
  switch (precision) {
    case ops::Precision::bf16: return launch_backward<Bf16Mma>(dq, dk, dv, ldk, ldv, dout, lse, di, a.q, a.k, a.v, a, s);
    case ops::Precision::tf32: return launch_backward<Tf32Mma>(dq, dk, dv, ldk, ldv, dout, lse, di, a.q, a.k, a.v, a, s);
    default: return launch_backward<Fp32Mma>(dq, dk, dv, ldk, ldv, dout, lse, di, a.q, a.k, a.v, a, s);
  }
}

Status flash_attention_backward(uint16_t* dq, uint16_t* dk, uint16_t* dv, const ops::AttentionLayout& ldk,
                                const ops::AttentionLayout& ldv, const uint16_t* dout, const float* lse,
                                const float* di, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                                const CoreArgs& a, cudaStream_t s) {
  return launch_backward<Bf16Mma>(dq, dk, dv, ldk, ldv, dout, lse, di, q, k, v, a, s);
}

}  // namespace nf::cuda
