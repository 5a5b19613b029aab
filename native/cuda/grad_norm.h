// The reductions gradient clipping is built from, on the GPU (the CUDA twins of native/cpu/optim.h's
// sum_squares and scale): lib/training/optim.ts's clipGradNorm sums every gradient's squares, then scales;
// and the fused clip over one buffer (a gradient arena), the clipGradNorm op.
#pragma once
#include <cstdint>

#include "../core/status.h"
#include "../ops/optim.h"

namespace nf::cuda {

// out[0] = Σ x² (accumulated in double, deterministic: fixed blocks, then one block adds them).
Status sum_squares(float* out, const float* x, int64_t n);
// x *= s.
Status scale(float* x, int64_t n, float s);
// torch.nn.utils.clip_grad_norm_ over grad [n]: total = sqrt(Σ grad²) (double), coef = max_norm /
// (total + 1e-6); grad *= coef unless coef ≥ 1 (NaN included); total_norm[0] = total. All on the
// device, queued on the stream.
Status clip_grad_norm(float* total_norm, float* grad, int64_t n, double max_norm);

Status run(const ops::SumSquares<float>& p);
Status run(const ops::Scale<float>& p);
Status run(const ops::ClipGradNorm<float>& p);
Status run(const ops::ClipCoefficient<float>& p);
Status run(const ops::ClipScale<float>& p);

}  // namespace nf::cuda
