// Finite scan: the position of the first NaN or ±Inf in a float array. checkFinite mode
// (lib/core/finite.ts) runs it over every float tensor entering and leaving a module, so it has to be
// fast enough to leave on while debugging a training run: one pass at memory speed, threaded.
#pragma once
#include <cstdint>

#include "../ops/finite.h"
#include "kernel_decl.h"

namespace nf::cpu {

// *first = the smallest i < n with x[i] NaN or ±Inf, or -1 when all n values are finite.
Status first_nonfinite(int64_t* first, const float* x, int64_t n);

// The firstNonFinite op (native/ops/finite.h): index[0] = first_nonfinite.
Status run(const ops::FirstNonFinite<float>& p);

// The variant scan of x[begin, end): the first non-finite index there, or -1.
NF_KERNEL_DECL(int64_t first_nonfinite_range(const float* x, int64_t begin, int64_t end))

}  // namespace nf::cpu
