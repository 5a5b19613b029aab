// The finite scan behind checkFinite mode (lib/core/finite.ts): the position of the first NaN or ±Inf in
// a float array.
#pragma once
#include <cstdint>

#include "schema.h"

namespace nf::ops {

template <class T>
struct FirstNonFinite {
  static constexpr const char* name = "firstNonFinite";
  static constexpr const char* summary =
      "index[0] = the first position i < n of a NaN or ±Inf in x, or −1 when every value is finite. `index` is a "
      "Float64Array of length 1 whatever x is (positions can pass 2^31); a Float64Array x runs the reference twin.";
  int64_t n = 0;
  const T* x = nullptr;
  double* index = nullptr;

  template <class R>
  static void fields(R& r, FirstNonFinite& p) {
    r.dim(p.n, "n", 0);
    r.in(p.x, "x", NF_SHAPE(p.n));
    r.out(p.index, "index", Shape("[1]", 1));
  }
};

}  // namespace nf::ops
