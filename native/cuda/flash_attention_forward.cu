// Attention forward on tensor cores ('bf16': mma.sync m16n8k16 bf16 x bf16 + fp32; 'tf32': m16n8k8;
// 'fp32': m16n8k8 by the 3xTF32 split, flash_attention.cuh's Fp32Mma),
// FlashAttention-2's algorithm with the tile machinery of flash_attention.cuh.
// Math (per batch b and head h): S = scale Q Kᵀ with blocked pairs -inf; P = softmax(S) per row;
// O = (P ∘ Z) V (Z the dropout mask scaled by 1/(1-p)); lse = log Σ exp(S) per row (-inf and O = 0
// for a row whose keys are all blocked), as attention.cu states. Q, K, V enter the products
// rounded to the precision's operand type (fp32: as big + small tf32 pairs); scores, softmax statistics and accumulators are fp32.
// Layout: Q, K, V, O [B, T, H, Dh] views with explicit strides (ops::AttentionLayout); lse [B, H, Tq].
// Dimension key: B batch, H heads, Tq/Tk query/key lengths, Dh head width, DP padded width, R keys
// per streamed tile.
// Kernel: a CTA per 128 queries of one (b, h) (grid ⌈Tq/128⌉ x H x B, 4 warps, 32 queries each as two
// 16-row mma blocks sharing every K and V fragment); Q staged once; K, V streamed in R-key tiles
// (PairStream, cp.async). Per tile a warp computes its 32 x R scores with mma_abt, masks them (per
// pair only in tiles tile_check flags), updates each row's running max m and sum l in the log2
// domain (scores times c = scale·log2e: the row max of the raw scores times c, then each
// p = 2^(c s − m) with the product inside the exponent's FMA, FlashAttention-2's one instruction a
// score; the accumulated O is rescaled by 2^(m_old − m_new)),
// applies dropout to P (l sums P before dropout) and adds P V with mma_pb from P's registers. l is
// kept per lane and summed over the row's 4 lanes at the end; lse = (m + log2 l)·ln 2. Causal: key
// tiles past the CTA's last query are not visited. A last tile whose live keys fit in kShortTile
// (T = 64k + 1 and the like) runs forward_tile at that width: the products of its first 16 keys only.
#include "flash_attention.h"

#include "flash_attention.cuh"

namespace nf::cuda {

namespace {

using namespace flash;

// Query rows per CTA: 4 warps x kBlocks 16-row blocks.
constexpr int kBlocks = 2, kQueries = kWarps * kBlocks * kWarpRows;

// One streamed tile of R keys from j0 (K tile kt, V tile vt: R rows of the shared operand tiles; with
// R = kShortTile only their first rows) for the warp's queries iw.. (its operand rows at qw): the scores,
// their mask, the online softmax step (the running max mx and sum l of each row, acc rescaled) and
// acc += P V. See the header.
template <class Mma, int R, int DP, bool kDropout>
__device__ __forceinline__ void forward_tile(float (&acc)[kBlocks][DP / 8][4], float (&mx)[kBlocks][2],
                                             float (&l)[kBlocks][2], const typename Mma::Op* qw,
                                             const typename Mma::Op* kt, const typename Mma::Op* vt, const CoreArgs& a,
                                             int64_t b, int64_t h, int lane, int iw, int j0) {
  constexpr int N = R / 8, DT = DP / 8, kWarpQueries = kBlocks * kWarpRows;
  const float c = a.scale * kLog2e;
  float s[kBlocks][N][4] = {};
  mma_abt<Mma, kBlocks, R, DP>(s, qw, kt, lane);
  if (tile_check(a, iw, iw + kWarpQueries, j0, j0 + R))  // else no pair of the tile is blocked
    mask_tile<false>(s, a, b, lane, iw, j0, -INFINITY);
#pragma unroll
  for (int m = 0; m < kBlocks; ++m) {
    const int im = iw + m * kWarpRows;
    float top[2], base[2];  // the tile's largest raw scores (blocked: -inf), then scaled
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      top[r] = fmaxf(mx[m][r], quad_max(lane_row_max(s[m], r)) * c);  // (c > 0: the max of the scaled scores)
      base[r] = top[r] == -INFINITY ? 0.0f : top[r];  // a row blocked so far: every p is 0
      const float alpha = exp2_ftz(mx[m][r] - base[r]);
      mx[m][r] = top[r];
      l[m][r] *= alpha;
#pragma unroll
      for (int dt = 0; dt < DT; ++dt) acc[m][dt][2 * r] *= alpha, acc[m][dt][2 * r + 1] *= alpha;
    }
#pragma unroll
    for (int t = 0; t < N; ++t)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float p = exp2_ftz(fmaf(s[m][t][e], c, -base[e >> 1]));  // the scale in the exponent's FMA
        l[m][e >> 1] += p;
        if (kDropout && p != 0.0f) p *= keep_scale(a, b, h, im + acc_row(lane, e), j0 + acc_col(lane, t, e));
        s[m][t][e] = p;
      }
  }
  mma_pb<Mma, kBlocks, R, DP>(acc, s, vt, lane);
}

template <class Mma, class S, class O, int DP, bool kDropout>
__global__ void __launch_bounds__(kThreads, 2)
    flash_forward_kernel(O* o, float* lse, const S* q, const S* k, const S* v, CoreArgs a, bool vec) {
  using Op = typename Mma::Op;
  constexpr int R = stream_rows<Mma, S, DP>(kQueries), DT = DP / 8, ld = ld_of<Op, DP>();
  constexpr int kWarpQueries = kBlocks * kWarpRows;
  NF_DYNAMIC_SHARED(unsigned char, smem);
  Op* Qs = reinterpret_cast<Op*>(smem);
  PairStream<Mma, S, R, DP> kv(smem + tile_bytes<Op, DP>(kQueries));
  const int lane = int(threadIdx.x) % kWarp, warp = int(threadIdx.x) / kWarp;
  const int64_t b = blockIdx.z, h = blockIdx.y;
  const int i0 = int(blockIdx.x) * kQueries, iw = i0 + warp * kWarpQueries;
  const S* kh = head_rows(k, a.lk, b, h);
  const S* vh = head_rows(v, a.lv, b, h);
  stage_rows<kQueries, DP>(Qs, head_rows(q, a.lq, b, h), a.lq.row, i0, a.Tq, a.Dh, vec);
  const int key_end = a.causal && i0 + kQueries < a.Tk ? i0 + kQueries : a.Tk;
  if (key_end > 0) kv.issue(0, kh, a.lk.row, vh, a.lv.row, 0, a.Tk, a.Dh, vec);  // (and Q's copy, if any)

  // Row (m, r) of the lane: query iw + 16 m + g + 8 r; its running max m_ (log2 domain) and partial sum l.
  float acc[kBlocks][DT][4] = {}, mx[kBlocks][2], l[kBlocks][2] = {};
#pragma unroll
  for (int m = 0; m < kBlocks; ++m) mx[m][0] = mx[m][1] = -INFINITY;
  // Whole tiles, then (short) a last tile whose live keys all lie in its first kShortTile rows.
  const Op* qw = Qs + warp * kWarpQueries * ld;
  constexpr bool kShort = has_short_tile<R, DP>();
  const int whole_end = kShort ? whole_tiles_end<R>(0, key_end) : key_end;
  int n = 0, j0 = 0;
  for (; j0 < whole_end; ++n, j0 += R) {
    kv.land(n);
    if (j0 + R < key_end) kv.issue(n + 1, kh, a.lk.row, vh, a.lv.row, j0 + R, a.Tk, a.Dh, vec);
    if (idle(a, iw, iw + kWarpQueries, j0)) continue;
    forward_tile<Mma, R, DP, kDropout>(acc, mx, l, qw, kv.tile(n, 0), kv.tile(n, 1), a, b, h, lane, iw, j0);
  }
  if constexpr (kShort) {
    if (j0 < key_end) {
      kv.land(n);
      if (!idle(a, iw, iw + kWarpQueries, j0))
        forward_tile<Mma, kShortTile, DP, kDropout>(acc, mx, l, qw, kv.tile(n, 0), kv.tile(n, 1), a, b, h, lane, iw,
                                                    j0);
    }
  }
  float f[kBlocks][2];  // O = acc / l (0 for a row whose keys are all blocked)
#pragma unroll
  for (int m = 0; m < kBlocks; ++m)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      l[m][r] = quad_sum(l[m][r]);
      f[m][r] = l[m][r] > 0.0f ? 1.0f / l[m][r] : 0.0f;
    }
  store_rows(acc, f, lane, a.Dh, head_rows(o, a.lo, b, h), a.lo.row, iw, a.Tq);
  if (lane % 4 == 0)
#pragma unroll
    for (int m = 0; m < kBlocks; ++m)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int i = iw + m * kWarpRows + acc_row(lane, 2 * r);
        if (i < a.Tq) lse[(b * a.H + h) * a.Tq + i] = l[m][r] > 0.0f ? (mx[m][r] + log2f(l[m][r])) * kLn2 : -INFINITY;
      }
}

// q, k, v (layouts a.lq, a.lk, a.lv) of storage S into o (a.lo) of storage O.
template <class Mma, class S, class O>
Status launch_forward(O* o, float* lse, const S* q, const S* k, const S* v, const CoreArgs& a, cudaStream_t s) {
  const bool vec = vector_views<S>({{q, a.lq}, {k, a.lk}, {v, a.lv}}, a.Dh);
  return with_padded_width(a.Dh, [&](auto dp) -> Status {
    return with_dropout(a.p > 0.0f, [&](auto dropout) -> Status {
      constexpr int DP = decltype(dp)::value;
      NF_CUDA_TRY("flash_attention_forward",
                  launch(flash_forward_kernel<Mma, S, O, DP, decltype(dropout)::value>,
                         dim3(unsigned(ceil_div(a.Tq, kQueries)), unsigned(a.H), unsigned(a.B)), dim3(kThreads),
                         kernel_smem<Mma, S, DP>(kQueries), s, o, lse, q, k, v, a, vec));
      return Status::Ok();
    });
  });
}

}  // namespace

Status flash_attention_forward(float* o, float* lse, const CoreArgs& a, ops::Precision precision, cudaStream_t s) {
  switch (precision) {
    case ops::Precision::bf16: return launch_forward<Bf16Mma>(o, lse, a.q, a.k, a.v, a, s);
    case ops::Precision::tf32: return launch_forward<Tf32Mma>(o, lse, a.q, a.k, a.v, a, s);
    default: return launch_forward<Fp32Mma>(o, lse, a.q, a.k, a.v, a, s);
  }
}

Status flash_attention_forward(uint16_t* o, float* lse, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                               const CoreArgs& a, cudaStream_t s) {
  return launch_forward<Bf16Mma>(o, lse, q, k, v, a, s);
}

}  // namespace nf::cuda
