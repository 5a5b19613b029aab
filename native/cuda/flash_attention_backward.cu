// Attention backward on tensor cores ('bf16': mma.sync m16n8k16; 'tf32': m16n8k8; 'fp32': m16n8k8 by
// the 3xTF32 split), FlashAttention-2's
// algorithm with the tile machinery of flash_attention.cuh. This file: the dQ kernel, the dK/dV kernel's
// recompute instantiations and the launches; the backward's tiles and the dK/dV kernel are in
// flash_attention_backward.cuh, its atomic-dQ instantiations in flash_attention_dq_atomic.cu.
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
//   Both: a last streamed tile whose live rows fit in kShortTile (T = 64k + 1 and the like) takes the
//   products of its first 16 rows only (dkdv_tile, dq_tile at that width; not with atomic dQ).
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
//     weight gradients) may differ in the last bits from run to run. With attention dropout, and where
//     the dS tile does not fit the shared memory (fp32 storage at 'tf32' and 'fp32' with head widths
//     over 96), the recompute pass runs instead. Which is faster is a GPU measurement
//     (bench/gpu/attention_run.sh runs both).
#include "flash_attention.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "flash_attention_backward.cuh"

namespace nf::cuda {

namespace {

// dQ holds one 16 x DP accumulator a warp (dK/dV two): without dropout its registers fit 3 CTAs an SM
// (168 a thread, no spills on sm_80/89/90), 12 warps to hide its latencies where shared memory allows
// (Dh 64: 3 x 54 KB of bf16 tiles on an H100/H200's 227 KB); the dropout instantiations would spill
// (8-20 bytes on sm_80/89) and keep 2.
__host__ __device__ constexpr int dq_ctas_per_sm(bool dropout) { return dropout ? 2 : 3; }

// One streamed tile of R keys from j0 (K tile kt, V tile vt; with R = kShortTile their first rows) for the
// warp's queries iw.. (Q rows qw, dO rows gw; L, Di its rows' lse2 and Di): S, dP, P, dS, and acc += dS K.
template <class Mma, int R, int DP, bool kDropout>
__device__ __forceinline__ void dq_tile(float (&acc)[1][DP / 8][4], const typename Mma::Op* qw,
                                        const typename Mma::Op* gw, const typename Mma::Op* kt,
                                        const typename Mma::Op* vt, const float (&L)[2], const float (&Di)[2],
                                        const CoreArgs& a, int64_t b, int64_t h, int lane, int iw, int j0) {
  constexpr int N = R / 8;
  const float c = a.scale * kLog2e;
  float s[1][N][4] = {}, dp[1][N][4] = {};
  mma_abt<Mma, 1, R, DP>(s, qw, kt, lane);
  mma_abt<Mma, 1, R, DP>(dp, gw, vt, lane);
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
  mma_pb<Mma, 1, R, DP>(acc, s, kt, lane);
}

template <class Mma, class S, class O, int DP, bool kDropout>
__global__ void __launch_bounds__(kThreads, dq_ctas_per_sm(kDropout))
    flash_dq_kernel(O* dq, const S* q, const S* k, const S* v, const S* dout, const float* lse, const float* di,
                    CoreArgs a, bool vec) {
  using Op = typename Mma::Op;
  constexpr int R = stream_rows<Mma, S, DP>(2 * kBlockRows);
  constexpr int DT = DP / 8, ld = ld_of<Op, DP>();
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

  float L[2], Di[2], acc[1][DT][4] = {};
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int i = iw + acc_row(lane, 2 * r);
    L[r] = lse2(lse, row0, i, a.Tq);
    Di[r] = i < a.Tq ? di[row0 + i] : 0.0f;
  }
  // Whole tiles, then (short) a last tile whose live keys all lie in its first kShortTile rows.
  const Op *qw = qdo.x + warp * kWarpRows * ld, *gw = qdo.y + warp * kWarpRows * ld;
  constexpr bool kShort = has_short_tile<R, DP>();
  const int whole_end = kShort ? whole_tiles_end<R>(0, key_end) : key_end;
  int n = 0, j0 = 0;
  for (; j0 < whole_end; ++n, j0 += R) {
    kv.land(n);
    if (j0 + R < key_end) kv.issue(n + 1, kh, a.lk.row, vh, a.lv.row, j0 + R, a.Tk, a.Dh, vec);
    if (idle(a, iw, iw + kWarpRows, j0)) continue;
    dq_tile<Mma, R, DP, kDropout>(acc, qw, gw, kv.tile(n, 0), kv.tile(n, 1), L, Di, a, b, h, lane, iw, j0);
  }
  if constexpr (kShort) {
    if (j0 < key_end) {
      kv.land(n);
      if (!idle(a, iw, iw + kWarpRows, j0))
        dq_tile<Mma, kShortTile, DP, kDropout>(acc, qw, gw, kv.tile(n, 0), kv.tile(n, 1), L, Di, a, b, h, lane, iw, j0);
    }
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
  if (mode == AttentionDq::atomic) {
    bool ran = false;
    NF_TRY(launch_atomic_dq<Mma>(dq, dk, dv, ldk, ldv, dout, lse, di, q, k, v, a, vec, s, &ran));
    if (ran) return Status::Ok();
  }
  return with_padded_width(a.Dh, [&](auto dp) -> Status {
    return with_dropout(a.p > 0.0f, [&](auto dropout) -> Status {
      constexpr int DP = decltype(dp)::value;
      constexpr bool kDropout = decltype(dropout)::value;
      const dim3 keys(unsigned(ceil_div(a.Tk, kBlockRows)), unsigned(a.H), unsigned(a.B));
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
