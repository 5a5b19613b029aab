// Internal to the attention kernels (attention.cu's fp32 kernels and the tensor-core kernels of
// flash_attention_*.cu): the arguments every attention-core kernel takes, and the two per-pair rules
// they must all agree on bit for bit — which (query i, key j) pairs are blocked, and the dropout
// factor of a pair (element ((b*H + h)*Tq + i)*Tk + j of the Philox stream (seed, offset), as on the
// CPU), so a dropout mask is the same at every precision.
#pragma once
#include <cstdint>

#include "../ops/attention.h"
#include "common.cuh"
#include "philox.cuh"

namespace nf::cuda {

struct CoreArgs {
  const float* q;
  const float* k;
  const float* v;
  ops::AttentionLayout lq, lk, lv, lo;
  int64_t B, H;
  int Tq, Tk, Dh;
  float scale;
  bool causal;
  const uint8_t* key_padding_mask;
  const uint8_t* attn_mask;
  bool attn_batched;
  float p;
  uint64_t seed, offset;
};

inline CoreArgs core_args(const float* q, const float* k, const float* v, const ops::AttentionMasks& m,
                          const ops::AttentionCoreDims& d) {
  return CoreArgs{q,         k,     v,        d.q,       d.k,      d.v,       d.o,
                  d.B,       d.H,       int(d.Tq), int(d.Tk), int(d.Dh), d.scale, m.causal, m.key_padding_mask,
                  m.attn_mask,    m.attn_batched, d.dropout.p, d.dropout.seed, d.dropout.offset};
}

// Head h of batch b of a [B, T, H, Dh] view: its row 0.
template <class F>
__device__ __forceinline__ F* head_rows(F* base, const ops::AttentionLayout& l, int64_t b, int64_t h) {
  return base + b * l.batch + h * l.head;
}

__device__ __forceinline__ bool is_blocked(const CoreArgs& a, int64_t b, int i, int j) {
  if (i >= a.Tq || j >= a.Tk) return true;
  if (a.causal && j > i) return true;
  if (a.key_padding_mask && a.key_padding_mask[b * a.Tk + j]) return true;
  return a.attn_mask && a.attn_mask[((a.attn_batched ? b * a.Tq : 0) + i) * int64_t(a.Tk) + j];
}

// The dropout factor Z of weight (b, h, i, j).
__device__ __forceinline__ float keep_scale(const CoreArgs& a, int64_t b, int64_t h, int i, int j) {
  if (a.p <= 0.0f) return 1.0f;
  const uint64_t index = uint64_t(((b * a.H + h) * a.Tq + i) * int64_t(a.Tk) + j);
  return dropout_keep(a.seed, a.offset, index, a.p) ? 1.0f / (1.0f - a.p) : 0.0f;
}

}  // namespace nf::cuda
