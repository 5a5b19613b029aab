// Reference elementwise ops: plain scalar loops in the storage type T (double in the tests).
// The math is in ../elementwise.cpp's header; dropout draws its mask from nf::dropout_keep.
#pragma once
#include <cstdint>

#include "../../core/philox.h"

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

}  // namespace nf::ref
