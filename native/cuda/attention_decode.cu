// Incremental decoding on the GPU, composed on the host side of the stream: no kernel of its own.
// Math (per sequence b): self-attention: [q | k | v] = x Wqkvᵀ + qkv_bias, cache[b, t] = [k | v], then
//   o = softmax(scale q K[0..t]ᵀ) V[0..t] per head (scale: by default 1/sqrt(Dh)); cross-attention: q = x Wqᵀ + bq against
//   the memory's K|V (masked by key_padding_mask); out = o Wprojᵀ + proj_bias.
// Layout: x, out [B, D]; cache [B, max_t, 2D] and kv [B, Tk, 2D] rows K | V; qkv_weight [3D, D].
//   The core reads K and V in place through strided views: batch stride max_t·2D (or Tk·2D), row
//   stride 2D, head stride Dh (ops::attention_decode_core, the setup the CPU kernel shares).
// Dimension key: B sequences, D width, H heads, Dh = D/H, t the new position, Tk keys.
// Cost per step: 2 GEMV-shaped GEMMs (B·(3D + D)·D FMAs) and B·H·Tk·Dh for the core: memory-bound on
// the weights and the cache, as a decode step is.
#include "attention_decode.h"

#include <cmath>

#include "attention.h"
#include "common.cuh"
#include "elementwise.h"
#include "linear.h"

namespace nf::cuda {

Status attention_decode(float* out, float* cache, const float* kv, const float* x, const uint8_t* key_padding_mask,
                        const float* qkv_weight, const float* qkv_bias, const float* proj_weight, const float* proj_bias,
                        AttentionDecodeDims d, Compute mode) {
  const char* op = "attention_decode";
  NF_CHECK(d.B >= 1 && d.D >= 1 && d.H >= 1 && d.D % d.H == 0, op, "B, D, H must be positive with D divisible by H");
  NF_CHECK((cache != nullptr) != (kv != nullptr), op, "exactly one of cache (self-attention) and kv (cross-attention)");
  if (cache) NF_CHECK(d.t >= 0 && d.t < d.max_t, op, "t must be in [0, max_t)");
  else NF_CHECK(d.Tk >= 1, op, "Tk must be at least 1");
  const int64_t B = d.B, D = d.D;
  // The projected query (self-attention: q | k | v) [B, 3D], the context [B, D], the row lse [B, H].
  void* p = nullptr;
  NF_TRY(workspace(2, sizeof(float) * size_t(B * 4 * D + B * d.H), &p));
  float* proj_in = static_cast<float*>(p);
  float* ctx = proj_in + B * 3 * D;
  float* lse = ctx + B * D;
  const ops::AttentionDecodeCore core = ops::attention_decode_core(d, cache != nullptr, key_padding_mask);
  NF_TRY(linear_forward(proj_in, nullptr, x, qkv_weight, qkv_bias, {B, D, core.qkv_width}, Act::none, mode));
  if (cache) NF_TRY(copy_rows(cache + d.t * 2 * D, d.max_t * 2 * D, proj_in + D, 3 * D, B, 2 * D));
  const float* K = cache ? cache : kv;
  NF_TRY(attention_core_forward(ctx, lse, nullptr, proj_in, K, K + D, core.masks, core.dims));
  return linear_forward(out, nullptr, ctx, proj_weight, proj_bias, {B, D, D}, Act::none, mode);
}

Status run(const ops::AttentionDecode<float>& p) {
  return attention_decode(p.out, p.cache, p.kv, p.x, p.key_padding_mask, p.qkv_weight, p.qkv_bias, p.proj_weight, p.proj_bias, p.d,
                          compute_of(p.precision));
}

}  // namespace nf::cuda
