// Multi-head attention on the GPU: the attention core's host side, forward and backward, and the
// fused layer around it (QKV projection, core, output projection). The core's products run on tensor
// cores at every precision (flash_attention_forward.cu / flash_attention_backward.cu): 'bf16' and
// 'tf32' round their operands, 'fp32' computes them by the 3xTF32 split (flash_attention.cuh,
// Fp32Mma). This file holds what every precision shares: the checks, the Di pass of the backward and
// the optional weights output.
// Math (per batch b and head h; scale = the layer's scale param, by default 1/sqrt(Dh)):
//   S = scale Q Kᵀ with blocked pairs set to -inf; P = softmax over each row of S (a row whose keys
//   are all blocked gives P = 0, lse = -inf); O = (P ∘ Z) V, Z the dropout mask scaled by 1/(1-p).
//   Backward: Di = rowsum(dO ∘ O); dV = (P ∘ Z)ᵀ dO; dP = (dO Vᵀ) ∘ Z; dS = P ∘ (dP − Di);
//   dQ = scale dS K; dK = scale dSᵀ Q; P is recomputed from Q, K and the saved lse.
// Layout: Q, K, V, O (and their gradients) are [B, T, H, Dh] views with explicit strides
//   (AttentionLayout); lse and Di [B, H, Tq]; weights [B, H, Tq, Tk]. Dropout element
//   ((b*H + h)*Tq + i)*Tk + j of the Philox stream (seed, offset), as on the CPU.
// Dimension key: B batch, H heads, Tq/Tk query/key lengths, Dh head width (≤ 128), D = H*Dh.
// Kernels here (blocks of 4 warps): Di = rowsum(dO ∘ O), a group of up to 32 lanes per row (16-byte
//   vectors where the views allow); the weights, a block per (query, head, batch) recomputing its row
//   of P from the saved lse.
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
constexpr int kMaxDh = 128;
// Blocks per SM the kernels' registers must allow (at most 96 registers a thread).
constexpr int kMinBlocks = 5;

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
// di[(b*H + h)*Tq + i] = Σ_d dO·O over the row: G lanes a row (G a power of two, at most a warp),
// each adding chunks of W elements (W = kPack<S>, one 16-byte vector, where the views allow it; else
// 1), then a shuffle tree over the G lanes. dout, o of storage S (float or bf16). A warp per row with
// scalar loads (2 bytes a lane at bf16) kept too few bytes in flight: on an H200 this pass took 0.9 ms
// of a bf16 ViT-B/16 B64 training step (ncu), ~8x its DRAM time.
template <class S, int W>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    attention_di_kernel(float* di, const S* dout, const S* o, CoreArgs a, int64_t rows, int G) {
  const int t = int(threadIdx.x) % G;
  const int64_t row = (int64_t(blockIdx.x) * kThreads + threadIdx.x) / G;
  float s = 0.0f;
  if (row < rows) {
    const int i = int(row % a.Tq);
    const int64_t bh = row / a.Tq, h = bh % a.H, b = bh / a.H;
    const int64_t at = b * a.lo.batch + i * a.lo.row + h * a.lo.head;
    for (int d = t * W; d < a.Dh; d += G * W) {
      float x[W], y[W];
      load_cols<W>(dout + at, d, x);
      load_cols<W>(o + at, d, y);
#pragma unroll
      for (int j = 0; j < W; ++j) s = fmaf(x[j], y[j], s);
    }
  }
  for (int m = G / 2; m > 0; m /= 2) s += __shfl_xor_sync(kFullMask, s, m);  // (every lane takes part)
  if (row < rows && t == 0) di[row] = s;
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
  constexpr int V = kPack<S>;
  const bool vec = a.Dh % V == 0 && aligned16(dout, o) && a.lo.batch % V == 0 && a.lo.row % V == 0 && a.lo.head % V == 0;
  const int chunks = vec ? a.Dh / V : a.Dh;
  int G = 1;
  while (G < chunks && G < kWarp) G *= 2;
  const dim3 grid(unsigned(ceil_div(rows * G, kThreads)));
  if (vec) NF_CUDA_TRY(op, launch(attention_di_kernel<S, V>, grid, dim3(kThreads), 0, s, *di, dout, o, a, rows, G));
  else NF_CUDA_TRY(op, launch(attention_di_kernel<S, 1>, grid, dim3(kThreads), 0, s, *di, dout, o, a, rows, G));
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
    return flash_attention_forward(o, lse, a, precision, s);
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
    return flash_attention_backward(dq, dk, dv, d.k, d.v, dout, lse, di, a, precision, s);
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
  const T* bk_rounded = p.qkv_bias_rounded ? p.qkv_bias_rounded + D : nullptr;
  if (cross) {  // Q from x (weight rows 0..D-1), K | V from memory (rows D..3D-1)
    NF_TRY(linear_forward(p.q, nullptr, p.x, p.qkv_weight, p.qkv_bias, {d.B * d.Tq, D, D}, Act::none, mode,
                          p.qkv_bias_rounded));
    NF_TRY(linear_forward(p.kv, nullptr, p.memory, p.qkv_weight + D * D, bk, {d.B * d.Tk, D, 2 * D}, Act::none, mode,
                          bk_rounded));
  } else {
    NF_TRY(linear_forward(p.qkv, nullptr, p.x, p.qkv_weight, p.qkv_bias, {d.B * d.Tq, D, 3 * D}, Act::none, mode,
                          p.qkv_bias_rounded));
  }
  const T* Q = cross ? p.q : p.qkv;
  const T* K = cross ? p.kv : p.qkv + D;
  NF_TRY(attention_core_forward(p.ctx, p.lse, p.weights, Q, K, K + D, p.m, core_dims(d, cross), p.precision));
  return linear_forward(p.out, nullptr, p.ctx, p.proj_weight, p.proj_bias, {d.B * d.Tq, D, D}, Act::none, mode,
                        p.proj_bias_rounded);
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
