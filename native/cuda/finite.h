// The finite scan behind checkFinite mode on the GPU: the CUDA twin of native/cpu/finite.h's
// first_nonfinite, on a device array (native/ops/finite.h).
#pragma once
#include <cstdint>

#include "../core/status.h"
#include "../ops/finite.h"

namespace nf::cuda {

// index[0] (a double in device memory) = the first i < n with x[i] NaN or ±Inf, or −1 when every
// value is finite. Queued on the stream; nothing waits.
Status first_nonfinite(double* index, const float* x, int64_t n);

Status run(const ops::FirstNonFinite<float>& p);

}  // namespace nf::cuda
