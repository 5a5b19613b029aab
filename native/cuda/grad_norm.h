// The reductions gradient clipping is built from, on the GPU (the CUDA twins of native/cpu/optim.h's
// sum_squares and scale): lib/training/optim.ts's clipGradNorm sums every gradient's squares, then scales.
#pragma once
#include <cstdint>

#include "../core/status.h"
#include "../ops/optim.h"

namespace nf::cuda {

// out[0] = Σ x² (accumulated in double, deterministic: fixed blocks, then one block adds them).
Status sum_squares(float* out, const float* x, int64_t n);
// x *= s.
Status scale(float* x, int64_t n, float s);

Status run(const ops::SumSquares<float>& p);
Status run(const ops::Scale<float>& p);

}  // namespace nf::cuda
