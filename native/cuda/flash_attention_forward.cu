// Attention forward on tensor cores ('bf16': mma.sync m16n8k16 bf16 x bf16 + fp32; 'tf32': m16n8k8),
// FlashAttention-2's algorithm with the tile machinery of flash_attention.cuh.
// Math (per batch b and head h): S = scale Q Kᵀ with blocked pairs -inf; P = softmax(S) per row;
// O = (P ∘ Z) V (Z the dropout mask scaled by 1/(1-p)); lse = log Σ exp(S) per row (-inf and O = 0
// for a row whose keys are all blocked), as attention.cu's fp32 kernel. Q, K, V enter the products
// rounded to the precision's operand type; scores, softmax statistics and accumulators are fp32.
// Layout: Q, K, V, O [B, T, H, Dh] views with explicit strides (ops::AttentionLayout); lse [B, H, Tq].
// Dimension key: B batch, H heads, Tq/Tk query/key lengths, Dh head width, DP padded width, R keys
// per streamed tile.
// Kernel: a CTA per 64 queries of one (b, h) (grid ⌈Tq/64⌉ x H x B, 4 warps, 16 queries each); Q
// staged once; K, V streamed in R-key tiles (PairStream, cp.async). Per tile a warp computes its
// 16 x R scores with mma_abt, masks them (per pair only in tiles tile_check flags), updates each
// row's running max m and sum l in the log2 domain (scores times scale·log2e, exp2; the accumulated
// O is rescaled by 2^(m_old − m_new)), applies dropout to P (l sums P before dropout) and adds P V
// with mma_pb from P's registers. l is kept per lane and summed over the row's 4 lanes at the end;
// lse = (m + log2 l)·ln 2. Causal: key tiles past the CTA's last query are not visited.
#include "flash_attention.h"

#include "flash_attention.cuh"

namespace nf::cuda {

namespace {

using namespace flash;

template <class Mma, class S, int DP>
__global__ void __launch_bounds__(kThreads, 2)
    flash_forward_kernel(float* o, float* lse, const S* q, const S* k, const S* v, CoreArgs a, bool vec) {
  using Op = typename Mma::Op;
  constexpr int R = stream_rows<Mma, S, DP>(1), N = R / 8, DT = DP / 8, ld = ld_of<Op, DP>();
  NF_DYNAMIC_SHARED(unsigned char, smem);
  Op* Qs = reinterpret_cast<Op*>(smem);
  PairStream<Mma, S, R, DP> kv(smem + tile_bytes<Op, DP>(kBlockRows));
  const int lane = int(threadIdx.x) % kWarp, warp = int(threadIdx.x) / kWarp;
  const int64_t b = blockIdx.z, h = blockIdx.y;
  const int i0 = int(blockIdx.x) * kBlockRows, iw = i0 + warp * kWarpRows;
  const S* kh = head_rows(k, a.lk, b, h);
  const S* vh = head_rows(v, a.lv, b, h);
  load_rows<kBlockRows, DP>(Qs, head_rows(q, a.lq, b, h), a.lq.row, i0, a.Tq, a.Dh);
  const int key_end = a.causal && i0 + kBlockRows < a.Tk ? i0 + kBlockRows : a.Tk;
  if (key_end > 0) kv.issue(0, kh, a.lk.row, vh, a.lv.row, 0, a.Tk, a.Dh, vec);

  const float c = a.scale * kLog2e;
  float acc[DT][4] = {}, m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  for (int n = 0, j0 = 0; j0 < key_end; ++n, j0 += R) {
    kv.land(n);
    if (j0 + R < key_end) kv.issue(n + 1, kh, a.lk.row, vh, a.lv.row, j0 + R, a.Tk, a.Dh, vec);
    float s[N][4] = {};
    mma_abt<Mma, R, DP>(s, Qs + warp * kWarpRows * ld, kv.tile(n, 0), lane);
    const bool check = tile_check(a, iw, iw + kWarpRows, j0, j0 + R);
    float mx[2] = {m[0], m[1]};
#pragma unroll
    for (int t = 0; t < N; ++t)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const bool blocked = check && is_blocked(a, b, iw + acc_row(lane, e), j0 + acc_col(lane, t, e));
        s[t][e] = blocked ? -INFINITY : s[t][e] * c;
        mx[e >> 1] = fmaxf(mx[e >> 1], s[t][e]);
      }
    float base[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = quad_max(mx[r]);
      base[r] = mx[r] == -INFINITY ? 0.0f : mx[r];  // a row blocked so far: every p is 0
      const float alpha = exp2f(m[r] - base[r]);
      m[r] = mx[r];
      l[r] *= alpha;
#pragma unroll
      for (int dt = 0; dt < DT; ++dt) acc[dt][2 * r] *= alpha, acc[dt][2 * r + 1] *= alpha;
    }
#pragma unroll
    for (int t = 0; t < N; ++t)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float p = exp2f(s[t][e] - base[e >> 1]);
        l[e >> 1] += p;
        if (a.p > 0.0f && p != 0.0f) p *= keep_scale(a, b, h, iw + acc_row(lane, e), j0 + acc_col(lane, t, e));
        s[t][e] = p;
      }
    mma_pb<Mma, R, DP>(acc, s, kv.tile(n, 1), lane);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) l[r] = quad_sum(l[r]);
#pragma unroll
  for (int dt = 0; dt < DT; ++dt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = iw + acc_row(lane, e), d = acc_col(lane, dt, e);
      const float lr = l[e >> 1];
      if (i < a.Tq && d < a.Dh) o[b * a.lo.batch + i * a.lo.row + h * a.lo.head + d] = lr > 0.0f ? acc[dt][e] / lr : 0.0f;
    }
  if (lane % 4 == 0)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int i = iw + acc_row(lane, 2 * r);
      if (i < a.Tq) lse[(b * a.H + h) * a.Tq + i] = l[r] > 0.0f ? (m[r] + log2f(l[r])) * kLn2 : -INFINITY;
    }
}

template <class Mma>
Status launch_forward(float* o, float* lse, const CoreArgs& a, cudaStream_t s) {
  const bool vec = vector_views<float>({{a.q, a.lq}, {a.k, a.lk}, {a.v, a.lv}}, a.Dh);
  return with_padded_width(a.Dh, [&](auto dp) -> Status {
    constexpr int DP = decltype(dp)::value;
    NF_CUDA_TRY("flash_attention_forward",
                launch(flash_forward_kernel<Mma, float, DP>, dim3(unsigned(ceil_div(a.Tq, kBlockRows)), unsigned(a.H), unsigned(a.B)),
                       dim3(kThreads), kernel_smem<Mma, float, DP>(1), s, o, lse, a.q, a.k, a.v, a, vec));
    return Status::Ok();
  });
}

}  // namespace

Status flash_attention_forward(float* o, float* lse, const CoreArgs& a, ops::Precision precision, cudaStream_t s) {
  return precision == ops::Precision::bf16 ? launch_forward<Bf16Mma>(o, lse, a, s) : launch_forward<Tf32Mma>(o, lse, a, s);
}

}  // namespace nf::cuda
