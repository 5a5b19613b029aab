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

// The ops (native/ops/elementwise.h).
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
  dropout(p.out, p.x, p.d.n, p.d.p, p.d.seed, p.d.offset);
}
template <class T>
void run(const ops::DropoutBackward<T>& p) {
  dropout(p.dx, p.dout, p.d.n, p.d.p, p.d.seed, p.d.offset);
}
template <class T>
void run(const ops::CopyRows<T>& p) {
  for (int64_t r = 0; r < p.rows; ++r)
    for (int64_t c = 0; c < p.cols; ++c)
      p.dst[p.dst_offset + r * p.dst_stride + c] = p.src[p.src_offset + r * p.src_stride + c];
}

}  // namespace nf::ref
