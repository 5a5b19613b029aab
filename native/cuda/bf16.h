// Conversions between float32 and bfloat16 device arrays (precision 'bf16': a tensor's cast, and
// the bf16 copy of a master weight that the bf16 GEMMs read): the CUDA addon's cast(dst, src).
#pragma once
#include <cstdint>

#include "../core/status.h"
#include "../ops/schema.h"

namespace nf::cuda {

// dst[i] = src[i] rounded to nearest even (NaN stays NaN), i < n; queued on the backend's stream.
Status convert(ops::bf16* dst, const float* src, int64_t n);
// dst[i] = src[i] (exact), i < n.
Status convert(float* dst, const ops::bf16* src, int64_t n);

}  // namespace nf::cuda
