// The tensor-core attention core (flash_attention_forward.cu, flash_attention_backward.cu): what
// attention.cu's attention_core_forward / attention_core_backward run at every precision ('bf16',
// 'tf32', and 'fp32' by the 3xTF32 split). Masks, dropout stream and outputs as attention.cu
// describes; head widths up to 128. Storage float (any precision's layer at fp32
// storage), or bf16 (the layer's bf16 storage: bf16 operands whatever the caller's precision).
#pragma once
#include "../ops/precision.h"
#include "attention_core.cuh"

namespace nf::cuda {

// o (layout a.lo) and lse [B, H, Tq] (natural log; -inf for a fully blocked row, whose o is 0).
// precision: bf16, tf32 or fp32 (flash_attention.cuh: Bf16Mma, Tf32Mma, Fp32Mma).
Status flash_attention_forward(float* o, float* lse, const CoreArgs& a, ops::Precision precision, cudaStream_t s);
// bf16 storage (precision 'bf16'): q, k, v (a.lq, a.lk, a.lv; a.q, a.k, a.v are not read) and o
// bfloat16 bits, read straight into the bf16 operand tiles; o rounded to nearest even; lse fp32.
Status flash_attention_forward(uint16_t* o, float* lse, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                               const CoreArgs& a, cudaStream_t s);

// How the backward forms dQ (flash_attention_backward.cu): a second pass that recomputes S and dP
// (deterministic; the default), or FlashAttention-2's atomic adds from the dK/dV kernel (fewer
// products, results that may differ in the last bits between runs). attention_dq gives the process's
// choice: NF_CUDA_ATTENTION_DQ ('atomic' or 'recompute', read at first use; another value makes every
// backward fail with ERR_NF_INVALID_ARG naming it) until set_attention_dq.
enum class AttentionDq { recompute, atomic };
Status attention_dq(AttentionDq* mode);
void set_attention_dq(AttentionDq mode);

// dq (layout a.lq), dk (ldk), dv (ldv), overwritten, from dout (layout a.lo), the forward's lse and
// di = rowsum(dout ∘ o) [B, H, Tq].
Status flash_attention_backward(float* dq, float* dk, float* dv, const ops::AttentionLayout& ldk,
                                const ops::AttentionLayout& ldv, const float* dout, const float* lse, const float* di,
                                const CoreArgs& a, ops::Precision precision, cudaStream_t s);
// bf16 storage: dq, dk, dv, dout, q, k, v bfloat16 bits (the gradients rounded to nearest even); lse, di fp32.
Status flash_attention_backward(uint16_t* dq, uint16_t* dk, uint16_t* dv, const ops::AttentionLayout& ldk,
                                const ops::AttentionLayout& ldv, const uint16_t* dout, const float* lse,
                                const float* di, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                                const CoreArgs& a, cudaStream_t s);

}  // namespace nf::cuda
