// Multi-head attention on the GPU: a FlashAttention-2 style core, forward and backward, and the
// fused layer around it (QKV projection, core, output projection). This file holds the fp32 core on
// CUDA cores; the op's precision 'bf16' or 'tf32' sends the core to the tensor-core kernels of
// flash_attention_forward.cu / flash_attention_backward.cu (same masks, dropout stream, lse and
// outputs; the Di pass and the optional weights output below serve both).
// Math (per batch b and head h; scale = the layer's scale param, by default 1/sqrt(Dh)):
//   S = scale Q Kᵀ with blocked pairs set to -inf; P = softmax over each row of S (a row whose keys
//   are all blocked gives P = 0, lse = -inf); O = (P ∘ Z) V, Z the dropout mask scaled by 1/(1-p).
//   Backward: Di = rowsum(dO ∘ O); dV = (P ∘ Z)ᵀ dO; dP = (dO Vᵀ) ∘ Z; dS = P ∘ (dP − Di);
//   dQ = scale dS K; dK = scale dSᵀ Q; P is recomputed from Q, K and the saved lse.
// Layout: Q, K, V, O (and their gradients) are [B, T, H, Dh] views with explicit strides
//   (AttentionLayout); lse and Di [B, H, Tq]; weights [B, H, Tq, Tk]. Dropout element
//   ((b*H + h)*Tq + i)*Tk + j of the Philox stream (seed, offset), as on the CPU.
// Dimension key: B batch, H heads, Tq/Tk query/key lengths, Dh head width (≤ 128), D = H*Dh.
// Kernels (blocks of 4 warps; lanes hold head-width columns d = lane + 32c, c < C = ⌈Dh/32⌉):
//   forward: a block takes 16 queries (4 per warp) of one (b, h) and walks the keys in tiles of 32
//     staged in shared memory; lane j scores key j against each of the warp's rows, the warp keeps
//     each row's running max m and sum l (online softmax: the accumulated output is rescaled by
//     exp(m_old - m_new) when the max grows) and adds P V from shared memory (tile_accumulate, the
//     same product as dQ's dS K). No Tq x Tk matrix
//     exists; lse = m + log l is saved. Causal: key tiles beyond the block's last query are skipped.
//   backward, deterministic and without atomics, in three kernels: Di = rowsum(dO ∘ O) (a warp per
//     row); dK, dV by key tiles (a block owns 32 keys, 8 per warp, and walks the query tiles:
//     lane i recomputes P and dS for query i against the warp's keys, then the warp accumulates the
//     keys' dK, dV rows); dQ by query tiles (the forward's shape, accumulating dS K).
//   Shared-memory rows read by lanes of different rows use an odd stride (no bank conflicts).
#include "attention.h"

#include <cmath>

#include "attention_core.cuh"
#include "bf16.cuh"
#include "common.cuh"
#include "flash_attention.h"
#include "linear.h"

namespace nf::cuda {

namespace {

constexpr int kWarps = 4, kThreads = kWarps * kWarp;
constexpr int kRows = 4;                           // forward / dq: query rows per warp
constexpr int kBQ = kWarps * kRows;                // forward / dq: queries per block
constexpr int kBK = kWarp;                         // forward / dq: keys per tile (one per lane)
constexpr int kKeysPerWarp = 8;                    // dk/dv: keys per warp
constexpr int kBKb = kWarps * kKeysPerWarp;        // dk/dv: keys per block
constexpr int kBQb = kWarp;                        // dk/dv: queries per tile (one per lane)
constexpr int kMaxDh = 128;
// Blocks per SM the kernels' registers must allow: 5 (at most 96 registers a thread), 4 for dK/dV
// (128: its 2 x 8 keys' accumulators). Saying so also keeps ptxas from trading a few spills for
// occupancy, which it otherwise did on sm_89.
constexpr int kMinBlocks = 5, kMinBlocksDkdv = 4;

__host__ __device__ __forceinline__ int odd_stride(int Dh) { return Dh | 1; }
__device__ __forceinline__ int imin(int a, int b) { return a < b ? a : b; }

// Rows [t0, t0 + rows) of a head's [T, Dh] view into shared memory with row stride ld (times
// scale; zeros past T). A thread issues 8 loads before their stores: a store to shared memory could
// alias the next load as far as the compiler knows, so one load per store would wait out each load's
// latency in turn (the tensor-core kernels measured that on an H200: flash_attention.cuh load_rows).
__device__ __forceinline__ void load_rows(float* dst, int ld, const float* src, int64_t row_stride, int t0, int rows,
                                          int T, int Dh, float scale) {
  constexpr int kBatch = 8;
  const int n = rows * Dh, step = int(blockDim.x);
  for (int e0 = int(threadIdx.x); e0 < n; e0 += kBatch * step) {
    float x[kBatch];
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      const int e = e0 + k * step, r = e / Dh, d = e % Dh, t = t0 + r;
      x[k] = e < n && t < T ? scale * src[int64_t(t) * row_stride + d] : 0.0f;
    }
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      const int e = e0 + k * step;
      if (e < n) dst[e / Dh * ld + e % Dh] = x[k];
    }
  }
}

// acc[r][c] += Σ_{jj < jn} W[r·kBK + jj] · X[jj·ld + lane + 32c] for the warp's kRows rows (columns
// past Dh read as 0): the one tile product of the forward (O += (P∘Z) V) and of dQ (dQ += dS K), W
// the warp's [kRows][kBK] weights and X a [kBK][ld] tile of keys' rows, both in shared memory.
template <int C>
__device__ __forceinline__ void tile_accumulate(float (&acc)[kRows][C], const float* W, const float* X, int ld, int jn,
                                                int Dh, int lane) {
  for (int jj = 0; jj < jn; ++jj) {
    float xj[C];
#pragma unroll
    for (int c = 0; c < C; ++c) xj[c] = lane + kWarp * c < Dh ? X[jj * ld + lane + kWarp * c] : 0.0f;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const float w = W[r * kBK + jj];
#pragma unroll
      for (int c = 0; c < C; ++c) acc[r][c] = fmaf(w, xj[c], acc[r][c]);
    }
  }
}

// ---- forward ----------------------------------------------------------------------------------
// Shared memory (floats): Ks [kBK][odd(Dh)], Vs [kBK][Dh], Qs [kBQ][Dh] (scaled), Ps [kWarps][kRows][kBK].
size_t forward_smem(int Dh) {
  return sizeof(float) * size_t(kBK * odd_stride(Dh) + kBK * Dh + kBQ * Dh + kWarps * kRows * kBK);
}

template <int C>
__global__ void __launch_bounds__(kThreads, kMinBlocks) attention_forward_kernel(float* o, float* lse, CoreArgs a) {
  NF_DYNAMIC_SHARED(float, smem);
  const int Dh = a.Dh, ks = odd_stride(Dh);
  float* Ks = smem;
  float* Vs = Ks + kBK * ks;
  float* Qs = Vs + kBK * Dh;
  const int lane = int(threadIdx.x) % kWarp, warp = int(threadIdx.x) / kWarp;
  float* P = Qs + kBQ * Dh + warp * kRows * kBK;
  const int64_t b = blockIdx.z, h = blockIdx.y;
  const int i0 = int(blockIdx.x) * kBQ;
  const float* k = head_rows(a.k, a.lk, b, h);
  const float* v = head_rows(a.v, a.lv, b, h);
  load_rows(Qs, Dh, head_rows(a.q, a.lq, b, h), a.lq.row, i0, kBQ, a.Tq, Dh, a.scale);

  float m[kRows], l[kRows], acc[kRows][C];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
#pragma unroll
    for (int c = 0; c < C; ++c) acc[r][c] = 0.0f;
  }
  const int key_end = a.causal ? imin(a.Tk, i0 + kBQ) : a.Tk;
  for (int j0 = 0; j0 < key_end; j0 += kBK) {
    __syncthreads();  // Q is stored; every warp is done with the previous K, V tiles
    load_rows(Ks, ks, k, a.lk.row, j0, kBK, a.Tk, Dh, 1.0f);
    load_rows(Vs, Dh, v, a.lv.row, j0, kBK, a.Tk, Dh, 1.0f);
    __syncthreads();
    const int j = j0 + lane;
    const float* qw = Qs + warp * kRows * Dh;
    float sc[kRows];  // lane j's scores against the warp's rows: one read of K serves them all
#pragma unroll
    for (int r = 0; r < kRows; ++r) sc[r] = 0.0f;
    for (int d = 0; d < Dh; ++d) {
      const float kd = Ks[lane * ks + d];
#pragma unroll
      for (int r = 0; r < kRows; ++r) sc[r] = fmaf(qw[r * Dh + d], kd, sc[r]);
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int i = i0 + warp * kRows + r;
      const float s = is_blocked(a, b, i, j) ? -INFINITY : sc[r];
      const float m_new = fmaxf(m[r], warp_max(s));
      const float p = s == -INFINITY ? 0.0f : expf(s - m_new);
      const float alpha = m[r] == -INFINITY ? 0.0f : expf(m[r] - m_new);
      l[r] = fmaf(l[r], alpha, warp_sum(p));
      m[r] = m_new;
      P[r * kBK + lane] = p == 0.0f ? 0.0f : p * keep_scale(a, b, h, i, j);
#pragma unroll
      for (int c = 0; c < C; ++c) acc[r][c] *= alpha;
    }
    __syncwarp();  // the warp's P rows are complete
    tile_accumulate(acc, P, Vs, Dh, imin(kBK, a.Tk - j0), Dh, lane);
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int i = i0 + warp * kRows + r;
    if (i >= a.Tq) continue;
    const bool open = l[r] > 0.0f;  // some key is attended
    const float inv = open ? 1.0f / l[r] : 0.0f;
    float* orow = o + b * a.lo.batch + i * a.lo.row + h * a.lo.head;
#pragma unroll
    for (int c = 0; c < C; ++c) {
      const int d = lane + kWarp * c;
      if (d < Dh) orow[d] = acc[r][c] * inv;
    }
    if (lane == 0) lse[(b * a.H + h) * a.Tq + i] = open ? m[r] + logf(l[r]) : -INFINITY;
  }
}

// weights[b, h, i, :] = exp(scale q_i·k_j − lse_i) (0 where blocked): a block per (i, h, b). q, k
// (layouts a.lq, a.lk) of storage S (float or bf16); weights and lse fp32.
template <class S>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    attention_weights_kernel(float* weights, const float* lse, const S* q, const S* k_base, CoreArgs a) {
  const int64_t b = blockIdx.z, h = blockIdx.y;
  const int i = int(blockIdx.x);
  const int64_t row = (b * a.H + h) * a.Tq + i;
  const float L = lse[row];
  const S* qr = q + b * a.lq.batch + i * a.lq.row + h * a.lq.head;
  const S* k = head_rows(k_base, a.lk, b, h);
  for (int j = int(threadIdx.x); j < a.Tk; j += int(blockDim.x)) {
    float s = 0.0f;
    for (int d = 0; d < a.Dh; ++d) s = fmaf(a.scale * load(qr + d), load(k + j * a.lk.row + d), s);
    weights[row * a.Tk + j] = is_blocked(a, b, i, j) || L == -INFINITY ? 0.0f : expf(s - L);
  }
}

// ---- backward ---------------------------------------------------------------------------------
// di[(b*H + h)*Tq + i] = Σ_d dO·O over the row: a warp per row. dout, o of storage S (float or bf16).
template <class S>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    attention_di_kernel(float* di, const S* dout, const S* o, CoreArgs a, int64_t rows) {
  const int lane = int(threadIdx.x) % kWarp;
  const int64_t row = int64_t(blockIdx.x) * kWarps + threadIdx.x / kWarp;
  if (row >= rows) return;
  const int i = int(row % a.Tq);
  const int64_t bh = row / a.Tq, h = bh % a.H, b = bh / a.H;
  const int64_t at = b * a.lo.batch + i * a.lo.row + h * a.lo.head;
  float s = 0.0f;
  for (int d = lane; d < a.Dh; d += kWarp) s = fmaf(load(dout + at + d), load(o + at + d), s);
  s = warp_sum(s);
  if (lane == 0) di[row] = s;
}

// Shared memory (floats): Ks, Vs [kBKb][Dh]; Qs, dOs [kBQb][odd(Dh)]; PZ, DS [kWarps][kKeysPerWarp][kBQb];
// Ls, Ds [kBQb].
size_t dkdv_smem(int Dh) {
  return sizeof(float) *
         size_t(2 * kBKb * Dh + 2 * kBQb * odd_stride(Dh) + 2 * kWarps * kKeysPerWarp * kBQb + 2 * kBQb);
}

template <int C>
__global__ void __launch_bounds__(kThreads, kMinBlocksDkdv)
    attention_dkdv_kernel(float* dk, float* dv, AttentionLayout ldk, AttentionLayout ldv, const float* dout,
                          const float* lse, const float* di, CoreArgs a) {
  NF_DYNAMIC_SHARED(float, smem);
  const int Dh = a.Dh, qs = odd_stride(Dh);
  float* Ks = smem;
  float* Vs = Ks + kBKb * Dh;
  float* Qs = Vs + kBKb * Dh;
  float* dOs = Qs + kBQb * qs;
  const int lane = int(threadIdx.x) % kWarp, warp = int(threadIdx.x) / kWarp;
  float* PZ = dOs + kBQb * qs + warp * 2 * kKeysPerWarp * kBQb;  // this warp's P∘Z, then dS
  float* DS = PZ + kKeysPerWarp * kBQb;
  float* Ls = dOs + kBQb * qs + kWarps * 2 * kKeysPerWarp * kBQb;
  float* Ds = Ls + kBQb;
  const int64_t b = blockIdx.z, h = blockIdx.y;
  const int j0 = int(blockIdx.x) * kBKb;
  const float* q = head_rows(a.q, a.lq, b, h);
  const float* go = head_rows(dout, a.lo, b, h);
  const int64_t lrow = (b * a.H + h) * a.Tq;
  load_rows(Ks, Dh, head_rows(a.k, a.lk, b, h), a.lk.row, j0, kBKb, a.Tk, Dh, 1.0f);
  load_rows(Vs, Dh, head_rows(a.v, a.lv, b, h), a.lv.row, j0, kBKb, a.Tk, Dh, 1.0f);

  float acc_k[kKeysPerWarp][C], acc_v[kKeysPerWarp][C];
#pragma unroll
  for (int r = 0; r < kKeysPerWarp; ++r)
#pragma unroll
    for (int c = 0; c < C; ++c) acc_k[r][c] = acc_v[r][c] = 0.0f;
  const int i_start = a.causal ? j0 / kBQb * kBQb : 0;  // earlier queries see none of these keys
  for (int i0 = i_start; i0 < a.Tq; i0 += kBQb) {
    __syncthreads();  // K, V are stored; every warp is done with the previous Q, dO tiles
    load_rows(Qs, qs, q, a.lq.row, i0, kBQb, a.Tq, Dh, 1.0f);
    load_rows(dOs, qs, go, a.lo.row, i0, kBQb, a.Tq, Dh, 1.0f);
    for (int r = int(threadIdx.x); r < kBQb; r += int(blockDim.x)) {
      Ls[r] = i0 + r < a.Tq ? lse[lrow + i0 + r] : -INFINITY;
      Ds[r] = i0 + r < a.Tq ? di[lrow + i0 + r] : 0.0f;
    }
    __syncthreads();
    // Lane = query i0 + lane against the warp's keys.
    float s[kKeysPerWarp], dp[kKeysPerWarp];
#pragma unroll
    for (int r = 0; r < kKeysPerWarp; ++r) s[r] = dp[r] = 0.0f;
    const float* kw = Ks + warp * kKeysPerWarp * Dh;
    const float* vw = Vs + warp * kKeysPerWarp * Dh;
    for (int d = 0; d < Dh; ++d) {
      const float qd = Qs[lane * qs + d], gd = dOs[lane * qs + d];
#pragma unroll
      for (int r = 0; r < kKeysPerWarp; ++r) {
        s[r] = fmaf(qd, kw[r * Dh + d], s[r]);
        dp[r] = fmaf(gd, vw[r * Dh + d], dp[r]);
      }
    }
    const int i = i0 + lane;
    const float L = Ls[lane], Di = Ds[lane];
#pragma unroll
    for (int r = 0; r < kKeysPerWarp; ++r) {
      const int j = j0 + warp * kKeysPerWarp + r;
      const float p = L == -INFINITY || is_blocked(a, b, i, j) ? 0.0f : expf(a.scale * s[r] - L);
      const float z = p == 0.0f ? 0.0f : keep_scale(a, b, h, i, j);
      PZ[r * kBQb + lane] = p * z;
      DS[r * kBQb + lane] = p * (z * dp[r] - Di);
    }
    __syncwarp();  // the warp's P∘Z and dS columns are complete
    const int in = imin(kBQb, a.Tq - i0);
    for (int ii = 0; ii < in; ++ii) {
      float gi[C], qi[C];
#pragma unroll
      for (int c = 0; c < C; ++c) {
        const int d = lane + kWarp * c;
        gi[c] = d < Dh ? dOs[ii * qs + d] : 0.0f;
        qi[c] = d < Dh ? Qs[ii * qs + d] : 0.0f;
      }
#pragma unroll
      for (int r = 0; r < kKeysPerWarp; ++r) {
        const float pz = PZ[r * kBQb + ii], ds = DS[r * kBQb + ii];
#pragma unroll
        for (int c = 0; c < C; ++c) {
          acc_v[r][c] = fmaf(pz, gi[c], acc_v[r][c]);
          acc_k[r][c] = fmaf(ds, qi[c], acc_k[r][c]);
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kKeysPerWarp; ++r) {
    const int j = j0 + warp * kKeysPerWarp + r;
    if (j >= a.Tk) continue;
    float* dkr = dk + b * ldk.batch + j * ldk.row + h * ldk.head;
    float* dvr = dv + b * ldv.batch + j * ldv.row + h * ldv.head;
#pragma unroll
    for (int c = 0; c < C; ++c) {
      const int d = lane + kWarp * c;
      if (d < Dh) {
        dkr[d] = a.scale * acc_k[r][c];
        dvr[d] = acc_v[r][c];
      }
    }
  }
}

// Shared memory (floats): Ks, Vs [kBK][odd(Dh)]; Qs, dOs [kBQ][Dh]; DS [kWarps][kRows][kBK].
size_t dq_smem(int Dh) { return sizeof(float) * size_t(2 * kBK * odd_stride(Dh) + 2 * kBQ * Dh + kWarps * kRows * kBK); }

template <int C>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    attention_dq_kernel(float* dq, const float* dout, const float* lse, const float* di, CoreArgs a) {
  NF_DYNAMIC_SHARED(float, smem);
  const int Dh = a.Dh, ks = odd_stride(Dh);
  float* Ks = smem;
  float* Vs = Ks + kBK * ks;
  float* Qs = Vs + kBK * ks;
  float* dOs = Qs + kBQ * Dh;
  const int lane = int(threadIdx.x) % kWarp, warp = int(threadIdx.x) / kWarp;
  float* DS = dOs + kBQ * Dh + warp * kRows * kBK;
  const int64_t b = blockIdx.z, h = blockIdx.y;
  const int i0 = int(blockIdx.x) * kBQ;
  const float* k = head_rows(a.k, a.lk, b, h);
  const float* v = head_rows(a.v, a.lv, b, h);
  load_rows(Qs, Dh, head_rows(a.q, a.lq, b, h), a.lq.row, i0, kBQ, a.Tq, Dh, 1.0f);
  load_rows(dOs, Dh, head_rows(dout, a.lo, b, h), a.lo.row, i0, kBQ, a.Tq, Dh, 1.0f);
  float L[kRows], Di[kRows], acc[kRows][C];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int i = i0 + warp * kRows + r;
    const int64_t row = (b * a.H + h) * a.Tq + i;
    L[r] = i < a.Tq ? lse[row] : -INFINITY;
    Di[r] = i < a.Tq ? di[row] : 0.0f;
#pragma unroll
    for (int c = 0; c < C; ++c) acc[r][c] = 0.0f;
  }
  const int key_end = a.causal ? imin(a.Tk, i0 + kBQ) : a.Tk;
  for (int j0 = 0; j0 < key_end; j0 += kBK) {
    __syncthreads();  // Q, dO are stored; every warp is done with the previous K, V tiles
    load_rows(Ks, ks, k, a.lk.row, j0, kBK, a.Tk, Dh, 1.0f);
    load_rows(Vs, ks, v, a.lv.row, j0, kBK, a.Tk, Dh, 1.0f);
    __syncthreads();
    const int j = j0 + lane;
    const float* qw = Qs + warp * kRows * Dh;
    const float* gw = dOs + warp * kRows * Dh;
    float s[kRows], dp[kRows];  // lane j against the warp's rows: one read of K, V serves them all
#pragma unroll
    for (int r = 0; r < kRows; ++r) s[r] = dp[r] = 0.0f;
    for (int d = 0; d < Dh; ++d) {
      const float kd = Ks[lane * ks + d], vd = Vs[lane * ks + d];
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        s[r] = fmaf(qw[r * Dh + d], kd, s[r]);
        dp[r] = fmaf(gw[r * Dh + d], vd, dp[r]);
      }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int i = i0 + warp * kRows + r;
      const float p = L[r] == -INFINITY || is_blocked(a, b, i, j) ? 0.0f : expf(a.scale * s[r] - L[r]);
      const float z = p == 0.0f ? 0.0f : keep_scale(a, b, h, i, j);
      DS[r * kBK + lane] = p * (z * dp[r] - Di[r]);
    }
    __syncwarp();  // the warp's dS rows are complete
    tile_accumulate(acc, DS, Ks, ks, imin(kBK, a.Tk - j0), Dh, lane);
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int i = i0 + warp * kRows + r;
    if (i >= a.Tq) continue;
    float* dqr = dq + b * a.lq.batch + i * a.lq.row + h * a.lq.head;
#pragma unroll
    for (int c = 0; c < C; ++c) {
      const int d = lane + kWarp * c;
      if (d < Dh) dqr[d] = a.scale * acc[r][c];
    }
  }
}

// ---- host side --------------------------------------------------------------------------------
Status core_check(const char* op, const AttentionCoreDims& d) {
  NF_CHECK(d.B >= 0 && d.H >= 0 && d.Tq >= 0 && d.Tk >= 0, op, "B, H, Tq and Tk must be non-negative");
  NF_CHECK(d.B <= 65535 && d.H <= 65535, op, "B and H must be at most 65535");
  NF_CHECK(d.Tq < (int64_t(1) << 31) && d.Tk < (int64_t(1) << 31), op, "Tq and Tk must be below 2^31");
  NF_CHECK(d.Dh >= 1 && d.Dh <= kMaxDh, op, "the CUDA kernels take head widths Dh from 1 to 128");
  NF_CHECK(d.dropout.p >= 0.0f && d.dropout.p < 1.0f, op, "dropout p must be in [0, 1)");
  return Status::Ok();
}

// Column groups per lane: the kernels' template argument.
int column_groups(int64_t Dh) { return Dh <= 32 ? 1 : Dh <= 64 ? 2 : 4; }

}  // namespace

namespace {

// The optional weights output, from the saved lse, in fp32 at every precision and storage.
template <class S>
Status core_weights(const char* op, float* weights, const float* lse, const S* q, const S* k, const CoreArgs& a,
                    const AttentionCoreDims& d, cudaStream_t s) {
  if (weights)
    NF_CUDA_TRY(op, launch(attention_weights_kernel<S>, dim3(unsigned(d.Tq), unsigned(d.H), unsigned(d.B)),
                           dim3(kThreads), 0, s, weights, lse, q, k, a));
  return Status::Ok();
}

// Di = rowsum(dO ∘ O) [B, H, Tq] into the workspace (slot 0).
template <class S>
Status core_di(const char* op, float** di, const S* dout, const S* o, const CoreArgs& a, const AttentionCoreDims& d,
               cudaStream_t s) {
  const int64_t rows = d.B * d.H * d.Tq;
  void* scratch = nullptr;
  NF_TRY(workspace(0, sizeof(float) * size_t(rows), &scratch));
  *di = static_cast<float*>(scratch);
  NF_CUDA_TRY(op, launch(attention_di_kernel<S>, dim3(unsigned(ceil_div(rows, kWarps))), dim3(kThreads), 0, s, *di,
                         dout, o, a, rows));
  return Status::Ok();
}

// bfloat16 bits as the tensor-core kernels address them.
const uint16_t* bits_of(const bf16* p) { return reinterpret_cast<const uint16_t*>(p); }
uint16_t* bits_of(bf16* p) { return reinterpret_cast<uint16_t*>(p); }

}  // namespace

namespace {

// What both storages' forward do around their kernels: the checks and the stream first, run(stream)
// launches the storage's kernels, the optional weights output last.
template <class S, class Run>
Status core_forward(const CoreArgs& a, float* lse, float* weights, const S* q, const S* k, const AttentionCoreDims& d,
                    Run run) {
  const char* op = "attention_core_forward";
  NF_TRY(core_check(op, d));
  NF_CHECK(lse, op, "lse is required");
  if (d.B == 0 || d.H == 0 || d.Tq == 0) return Status::Ok();
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  NF_TRY(run(s));
  return core_weights(op, weights, lse, q, k, a, d, s);
}

}  // namespace

Status attention_core_forward(float* o, float* lse, float* weights, const float* q, const float* k, const float* v,
                              const AttentionMasks& masks, AttentionCoreDims d, ops::Precision precision) {
  const CoreArgs a = core_args(q, k, v, masks, d);
  return core_forward(a, lse, weights, q, k, d, [&](cudaStream_t s) -> Status {
    if (precision != ops::Precision::fp32) return flash_attention_forward(o, lse, a, precision, s);
    const int C = column_groups(d.Dh);
    auto kernel = C == 1 ? attention_forward_kernel<1> : C == 2 ? attention_forward_kernel<2> : attention_forward_kernel<4>;
    const dim3 grid(unsigned(ceil_div(d.Tq, kBQ)), unsigned(d.H), unsigned(d.B));
    NF_CUDA_TRY("attention_core_forward", launch(kernel, grid, dim3(kThreads), forward_smem(a.Dh), s, o, lse, a));
    return Status::Ok();
  });
}

Status attention_core_forward(bf16* o, float* lse, float* weights, const bf16* q, const bf16* k, const bf16* v,
                              const AttentionMasks& masks, AttentionCoreDims d, ops::Precision) {
  const CoreArgs a = core_args(nullptr, nullptr, nullptr, masks, d);
  return core_forward(a, lse, weights, q, k, d, [&](cudaStream_t s) -> Status {
    return flash_attention_forward(bits_of(o), lse, bits_of(q), bits_of(k), bits_of(v), a, s);
  });
}

namespace {

// What both storages' backward do first: the checks, the stream, the kernels' arguments and Di; then
// run(a, di, stream) launches the storage's kernels.
template <class S, class Run>
Status core_backward(const CoreArgs& a, const S* dout, const S* o, const AttentionCoreDims& d, Run run) {
  const char* op = "attention_core_backward";
  NF_TRY(core_check(op, d));
  if (d.B == 0 || d.H == 0 || d.Tq == 0 || d.Tk == 0) return Status::Ok();
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  float* di = nullptr;
  NF_TRY(core_di(op, &di, dout, o, a, d, s));
  return run(static_cast<const float*>(di), s);
}

}  // namespace

Status attention_core_backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                               const float* v, const float* o, const float* lse, const AttentionMasks& masks,
                               AttentionCoreDims d, ops::Precision precision) {
  const CoreArgs a = core_args(q, k, v, masks, d);
  return core_backward(a, dout, o, d, [&](const float* di, cudaStream_t s) -> Status {
    const char* op = "attention_core_backward";
    if (precision != ops::Precision::fp32)
      return flash_attention_backward(dq, dk, dv, d.k, d.v, dout, lse, di, a, precision, s);
    const int C = column_groups(d.Dh);
    auto dkdv = C == 1 ? attention_dkdv_kernel<1> : C == 2 ? attention_dkdv_kernel<2> : attention_dkdv_kernel<4>;
    auto dqk = C == 1 ? attention_dq_kernel<1> : C == 2 ? attention_dq_kernel<2> : attention_dq_kernel<4>;
    NF_CUDA_TRY(op, launch(dkdv, dim3(unsigned(ceil_div(d.Tk, kBKb)), unsigned(d.H), unsigned(d.B)), dim3(kThreads),
                           dkdv_smem(a.Dh), s, dk, dv, d.k, d.v, dout, lse, di, a));
    NF_CUDA_TRY(op, launch(dqk, dim3(unsigned(ceil_div(d.Tq, kBQ)), unsigned(d.H), unsigned(d.B)), dim3(kThreads),
                           dq_smem(a.Dh), s, dq, dout, lse, di, a));
    return Status::Ok();
  });
}

Status attention_core_backward(bf16* dq, bf16* dk, bf16* dv, const bf16* dout, const bf16* q, const bf16* k,
                               const bf16* v, const bf16* o, const float* lse, const AttentionMasks& masks,
                               AttentionCoreDims d, ops::Precision) {
  const CoreArgs a = core_args(nullptr, nullptr, nullptr, masks, d);
  return core_backward(a, dout, o, d, [&](const float* di, cudaStream_t s) -> Status {
    return flash_attention_backward(bits_of(dq), bits_of(dk), bits_of(dv), d.k, d.v, bits_of(dout), lse, di,
                                    bits_of(q), bits_of(k), bits_of(v), a, s);
  });
}

namespace {

Status layer_check(const char* op, const AttentionDims& d, bool cross, const void* qkv, const void* q, const void* kv) {
  NF_TRY(ops::attention_check(op, d, cross, qkv, q, kv));  // the checks every backend shares
  NF_CHECK(d.D / d.H <= kMaxDh, op, "the CUDA kernels take head widths Dh from 1 to 128");
  NF_CHECK(d.B <= 65535 && d.H <= 65535, op, "B and H must be at most 65535");
  return Status::Ok();
}

// The core's view of the layer's buffers: self-attention Q | K | V interleaved per token in
// qkv [B, T, 3D]; cross-attention q [B, Tq, D] and K | V in kv [B, Tk, 2D]; O in ctx [B, Tq, D].
AttentionCoreDims core_dims(const AttentionDims& d, bool cross) {
  AttentionCoreDims c;
  c.B = d.B, c.H = d.H, c.Tq = d.Tq, c.Tk = d.Tk, c.Dh = d.D / d.H;
  c.scale = ops::softmax_scale<float>(d.scale, c.Dh);
  c.dropout = d.dropout;
  const int64_t qw = cross ? d.D : 3 * d.D, kw = cross ? 2 * d.D : 3 * d.D;  // row widths
  c.q = {d.Tq * qw, qw, c.Dh};
  c.k = c.v = {d.Tk * kw, kw, c.Dh};
  c.o = {d.Tq * d.D, d.D, c.Dh};
  return c;
}

// The layer at storage T (float; or bf16 under precision 'bf16': activations, the saved buffers and
// their gradients bf16, the weights the parameters' bf16 copies, biases, parameter gradients, lse and
// the weights output float).
template <class T>
Status forward(const ops::AttentionForward<T>& p) {
  const AttentionDims& d = p.d;
  const bool cross = p.memory != nullptr;
  const Compute mode = compute_of(p.precision);
  NF_TRY(layer_check("attention_forward", d, cross, p.qkv, p.q, p.kv));
  const int64_t D = d.D;
  const float* bk = p.qkv_bias ? p.qkv_bias + D : nullptr;
  if (cross) {  // Q from x (weight rows 0..D-1), K | V from memory (rows D..3D-1)
    NF_TRY(linear_forward(p.q, nullptr, p.x, p.qkv_weight, p.qkv_bias, {d.B * d.Tq, D, D}, Act::none, mode));
    NF_TRY(linear_forward(p.kv, nullptr, p.memory, p.qkv_weight + D * D, bk, {d.B * d.Tk, D, 2 * D}, Act::none, mode));
  } else {
    NF_TRY(linear_forward(p.qkv, nullptr, p.x, p.qkv_weight, p.qkv_bias, {d.B * d.Tq, D, 3 * D}, Act::none, mode));
  }
  const T* Q = cross ? p.q : p.qkv;
  const T* K = cross ? p.kv : p.qkv + D;
  NF_TRY(attention_core_forward(p.ctx, p.lse, p.weights, Q, K, K + D, p.m, core_dims(d, cross), p.precision));
  return linear_forward(p.out, nullptr, p.ctx, p.proj_weight, p.proj_bias, {d.B * d.Tq, D, D}, Act::none, mode);
}

template <class T>
Status backward(const ops::AttentionBackward<T>& p) {
  const AttentionDims& d = p.d;
  const bool cross = p.memory != nullptr;
  const Compute mode = compute_of(p.precision);
  NF_TRY(layer_check("attention_backward", d, cross, p.qkv, p.q, p.kv));
  NF_CHECK(cross || !p.dmemory, "attention_backward", "dmemory is only for cross-attention");
  const int64_t D = d.D, rq = d.B * d.Tq, rk = d.B * d.Tk;
  // Scratch (T): dctx [rq, D] (slot 2); the projections' output gradients laid out like the saved
  // buffers (slot 3): self dqkv [rq, 3D]; cross dq [rq, D] then dkv [rk, 2D].
  void* dctx_p = nullptr;
  void* grad_p = nullptr;
  NF_TRY(workspace(2, sizeof(T) * size_t(rq * D), &dctx_p));
  NF_TRY(workspace(3, sizeof(T) * size_t((rq + 2 * rk) * D), &grad_p));
  T* dctx = static_cast<T*>(dctx_p);
  T* grad = static_cast<T*>(grad_p);
  NF_TRY(linear_backward(dctx, p.d_proj_weight, p.d_proj_bias, p.dout, p.ctx, p.proj_weight, {rq, D, D}, mode));
  const T* Q = cross ? p.q : p.qkv;
  const T* K = cross ? p.kv : p.qkv + D;
  T* gQ = grad;
  T* gK = cross ? grad + rq * D : grad + D;
  NF_TRY(attention_core_backward(gQ, gK, gK + D, static_cast<const T*>(dctx), Q, K, K + D, p.ctx, p.lse, p.m,
                                 core_dims(d, cross), p.precision));
  if (!cross) return linear_backward(p.dx, p.d_qkv_weight, p.d_qkv_bias, grad, p.x, p.qkv_weight, {rq, D, 3 * D}, mode);
  NF_TRY(linear_backward(p.dx, p.d_qkv_weight, p.d_qkv_bias, gQ, p.x, p.qkv_weight, {rq, D, D}, mode));
  return linear_backward(p.dmemory, p.d_qkv_weight + D * D, p.d_qkv_bias ? p.d_qkv_bias + D : nullptr, gK, p.memory, p.qkv_weight + D * D,
                         {rk, D, 2 * D}, mode);
}

}  // namespace

Status run(const ops::AttentionForward<float>& p) { return forward(p); }
Status run(const ops::AttentionForward<bf16>& p) { return forward(p); }
Status run(const ops::AttentionBackward<float>& p) { return backward(p); }
Status run(const ops::AttentionBackward<bf16>& p) { return backward(p); }

}  // namespace nf::cuda
