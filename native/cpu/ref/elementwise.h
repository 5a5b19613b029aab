// Reference elementwise ops: plain scalar loops in the storage type T (double in the tests).
// The ops and their math: native/ops/elementwise.h; dropout draws its mask from nf::dropout_keep.
#pragma once
#include <cstdint>

#include "../../core/philox.h"
#include "../../ops/elementwise.h"

namespace nf::ref {

// out = a + b (out may be a or b)
template <class T>
void add(T* out, const T* a, const T* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

// out = x * keep_i / (1 - p): dropout forward, and its backward applied to dout.
template <class T>
void dropout(T* out, const T* x, int64_t n, float p, uint64_t seed, uint64_t offset) {
  const double keep_scale = 1.0 / (1.0 - double(p));
  for (int64_t i = 0; i < n; ++i)
    out[i] = static_cast<T>(double(x[i]) * (dropout_keep(seed, offset, i, p) ? keep_scale : 0.0));
}

// y[r, c] = x[r, c] * gamma[c] over [rows, cols] (y may be x)
template <class T>
void channel_scale(T* y, const T* x, const T* gamma, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) y[r * cols + c] = x[r * cols + c] * gamma[c];
}

// The ops (native/ops/elementwise.h).
template <class T>
void run(const ops::ChannelScaleForward<T>& p) {
  channel_scale(p.y, p.x, p.gamma, p.rows, p.cols);
}
template <class T>
void run(const ops::ChannelScaleBackward<T>& p) {
  for (int64_t c = 0; c < p.cols; ++c) {  // dgamma first: dx may be dy
    T s = 0;
    for (int64_t r = 0; r < p.rows; ++r) s += p.dy[r * p.cols + c] * p.x[r * p.cols + c];
    p.dgamma[c] += s;
  }
  if (p.dx) channel_scale(p.dx, p.dy, p.gamma, p.rows, p.cols);
}
template <class T>
void run(const ops::Zero<T>& p) {
  for (int64_t i = 0; i < p.n; ++i) p.x[i] = T(0);
}
template <class T>
void run(const ops::Add<T>& p) {
  add(p.out, p.a, p.b, p.n);
}
template <class T>
void run(const ops::Accumulate<T>& p) {
  add(p.y, p.y, p.x, p.n);
}
template <class T>
void run(const ops::DropoutForward<T>& p) {
  dropout(p.out, p.x, p.d.n, p.d.p, ops::with_step_values(p.d).seed, p.d.offset);
}
template <class T>
void run(const ops::DropoutBackward<T>& p) {
  dropout(p.dx, p.dout, p.d.n, p.d.p, ops::with_step_values(p.d).seed, p.d.offset);
}
template <class T>
void run(const ops::CopyRows<T>& p) {
  for (int64_t r = 0; r < p.rows; ++r)
    for (int64_t c = 0; c < p.cols; ++c)
      p.dst[p.dst_offset + r * p.dst_stride + c] = p.src[p.src_offset + r * p.src_stride + c];
}

}  // namespace nf::ref
