// Elementwise ops of the residual stream on the GPU, with the semantics of native/ops/elementwise.h
// (device pointers, queued on the backend's stream): a strided row copy (slicing token rows out of
// a [B, T, D] buffer and back) and the per-channel scale (timm's LayerScale) among them.
#pragma once
#include <cstdint>

#include "../core/status.h"
#include "../ops/elementwise.h"

namespace nf::cuda {

// The ops (native/ops/elementwise.h), on the building blocks below.
Status run(const ops::Add<float>& p);
Status run(const ops::Accumulate<float>& p);
Status run(const ops::DropoutForward<float>& p);
Status run(const ops::DropoutBackward<float>& p);
Status run(const ops::CopyRows<float>& p);
Status run(const ops::Zero<float>& p);
Status run(const ops::ChannelScaleForward<float>& p);
Status run(const ops::ChannelScaleBackward<float>& p);

// out = a + b over n elements; out may be a or b (y += x is add(y, y, x)).
Status add(float* out, const float* a, const float* b, int64_t n);

// out = x * keep / (1 - p): element i is kept when Philox element i of the stream (seed, offset) says
// so (native/core/philox.h, bit for bit); the same call applied to dout is the backward. out may be x.
// seed_from (device memory, optional): the seed is *seed_from instead, read by the kernel (a step
// value, native/ops/step_values.h: what a CUDA graph replays with each step's seed).
Status dropout(float* out, const float* x, int64_t n, float p, uint64_t seed, uint64_t offset,
               const double* seed_from = nullptr);

// dst[r * dst_stride + c] = src[r * src_stride + c] for r < rows, c < cols (strides in elements).
Status copy_rows(float* dst, int64_t dst_stride, const float* src, int64_t src_stride, int64_t rows, int64_t cols);

}  // namespace nf::cuda
