// Elementwise ops of the residual stream: add (residual add), accumulate (merging gradients),
// dropout (nn.Dropout with Philox masks regenerated in backward) and a strided row copy (the ops
// and their fields: native/ops/elementwise.h).
#pragma once
#include <cstdint>

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
// dst[dst_offset + r*dst_stride + c] = src[src_offset + r*src_stride + c], r < rows, c < cols.
Status run(const ops::CopyRows<float>& p);

NF_KERNEL_DECL(void add(float* out, const float* a, const float* b, int64_t n))
// out = x * keep_i / (1 - p), the forward and the backward alike (p > 0).
NF_KERNEL_DECL(void dropout(float* out, const float* x, const DropoutDims& d))

}  // namespace nf::cpu
