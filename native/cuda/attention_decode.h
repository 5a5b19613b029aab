// One step of incremental decoding on the GPU (greedy generation with a key/value cache): the CUDA
// twin of native/cpu/attention.h's attention_decode, composed from the layer's own pieces (the QKV
// projection GEMM, a strided row copy into the cache, the attention core with strided K/V views,
// the output projection). No kernel of its own.
#pragma once
#include <cstdint>

#include "../core/status.h"
#include "../ops/attention.h"
#include "gemm.h"

namespace nf::cuda {

using AttentionDecodeDims = ops::AttentionDecodeDims;

// The new query row x [B, 1, D] is projected and attends to
//   self-attention (cache non-null): the K|V cache [B, max_t, 2D], after this step's own K|V are
//     written into row t, so keys 0..t (Tk = t + 1) are attended; kv must be null;
//   cross-attention (kv non-null): the memory's precomputed K|V [B, Tk, 2D] (rows D..3D-1 of qkv_weight
//     applied to memory), with key_padding_mask [B, Tk] (optional).
// out [B, 1, D] = proj(attention). No dropout (inference). Scratch: workspace slot 2.
Status attention_decode(float* out, float* cache, const float* kv, const float* x, const uint8_t* key_padding_mask,
                        const float* qkv_weight, const float* qkv_bias, const float* proj_weight, const float* proj_bias,
                        AttentionDecodeDims d, Compute mode = Compute::fp32);

Status run(const ops::AttentionDecode<float>& p);

}  // namespace nf::cuda
