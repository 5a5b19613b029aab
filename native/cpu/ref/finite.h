// Reference finite scan: a plain loop over std::isfinite, in the storage type T (float to check
// the kernels on the same data, double for Float64Array callers).
#pragma once
#include <cmath>
#include <cstdint>

#include "../../ops/finite.h"

namespace nf::ref {

// The smallest i < n with x[i] NaN or ±Inf, or -1.
template <class T>
int64_t first_nonfinite(const T* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i])) return i;
  return -1;
}

// The firstNonFinite op (native/ops/finite.h).
template <class T>
void run(const ops::FirstNonFinite<T>& p) {
  *p.index = static_cast<double>(first_nonfinite(p.x, p.n));
}

}  // namespace nf::ref
