// The tensor-core attention core (flash_attention_forward.cu, flash_attention_backward.cu): what
// attention.cu's attention_core_forward / attention_core_backward run for the 'bf16' and 'tf32'
// precisions (the fp32 kernels stay in attention.cu). Same arguments, masks, dropout stream and
// outputs as the fp32 kernels; head widths up to 128.
#pragma once
#include "../ops/precision.h"
#include "attention_core.cuh"

namespace nf::cuda {

// o (layout a.lo) and lse [B, H, Tq] (natural log; -inf for a fully blocked row, whose o is 0).
// precision: bf16 or tf32.
Status flash_attention_forward(float* o, float* lse, const CoreArgs& a, ops::Precision precision, cudaStream_t s);

// dq (layout a.lq), dk (ldk), dv (ldv), overwritten, from dout (layout a.lo), the forward's lse and
// di = rowsum(dout ∘ o) [B, H, Tq].
Status flash_attention_backward(float* dq, float* dk, float* dv, const ops::AttentionLayout& ldk,
                                const ops::AttentionLayout& ldv, const float* dout, const float* lse, const float* di,
                                const CoreArgs& a, ops::Precision precision, cudaStream_t s);

}  // namespace nf::cuda
