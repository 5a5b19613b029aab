// Elementwise ops of the residual stream: add (residual add), accumulate (merging gradients),
// dropout (nn.Dropout with Philox masks regenerated in backward), a strided row copy, the
// per-channel scale (timm's LayerScale) and the activations (the ops and their fields:
// native/ops/elementwise.h, native/ops/activation.h).
#pragma once
#include <cstdint>

#include "../ops/activation.h"
#include "../ops/elementwise.h"
#include "kernel_decl.h"

namespace nf::cpu {

using DropoutDims = ops::DropoutDims;

// out[n] = a + b. out may be a or b (not a partial overlap).
Status run(const ops::Add<float>& p);
// y[n] += x.
Status run(const ops::Accumulate<float>& p);
// x = 0.
Status run(const ops::Zero<float>& p);
// out = x * keep_i / (1 - p), keep_i = nf::dropout_keep(seed, offset, i, p) (core/philox.h); out may be x.
Status run(const ops::DropoutForward<float>& p);
// dx = dout * keep_i / (1 - p): the forward's mask, regenerated from (seed, offset). dx may be dout.
Status run(const ops::DropoutBackward<float>& p);
// y[n] = act(x); y may be x.
Status run(const ops::ActivationForward<float>& p);
// dx[n] = dy * act'(x); dx may be dy.
Status run(const ops::ActivationBackward<float>& p);
// y[rows, cols] = x * gamma[cols] (per column); y may be x.
Status run(const ops::ChannelScaleForward<float>& p);
// dgamma[cols] += Σ_rows dy * x; then dx = dy * gamma (when dx; dx may be dy).
Status run(const ops::ChannelScaleBackward<float>& p);
// dst[dst_offset + r*dst_stride + c] = src[src_offset + r*src_stride + c], r < rows, c < cols.
Status run(const ops::CopyRows<float>& p);

// dst[n] = src converted between float32 and bfloat16 storage (ops::bf16 bits): to_bf16 rounds as
// vround_bf16 (to nearest even, denormals to zero as vcvtneps2bf16 does), else widens exactly. The
// public one runs the active variant (Tensor.cast on the CPU, through the core binding's castBf16).
void convert_bf16_storage(void* dst, const void* src, int64_t n, bool to_bf16);
NF_KERNEL_DECL(void convert_bf16(void* dst, const void* src, int64_t n, bool to_bf16))
NF_KERNEL_DECL(void add(float* out, const float* a, const float* b, int64_t n))
// out = x * keep_i / (1 - p), the forward and the backward alike (p > 0).
NF_KERNEL_DECL(void dropout(float* out, const float* x, const DropoutDims& d))
NF_KERNEL_DECL(void activation_forward(float* y, const float* x, int64_t n, ops::Act act))
NF_KERNEL_DECL(void activation_backward(float* dx, const float* dy, const float* x, int64_t n, ops::Act act))
NF_KERNEL_DECL(void channel_scale(float* y, const float* x, const float* gamma, int64_t rows, int64_t cols))

}  // namespace nf::cpu
