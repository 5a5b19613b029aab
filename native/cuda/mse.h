// Mean squared error over (optionally masked) rows, loss and gradient, on the GPU: the CUDA twin of
// native/cpu/loss.h's mse, in its own file beside loss.cu (cross-entropy).
#pragma once
#include <cstdint>

#include "../core/status.h"
#include "../ops/loss.h"

namespace nf::cuda {

using MseDims = ops::MseDims;

// loss[0] = Σ_selected (pred − target)² / (selected rows · cols), where a row is selected when mask is
// null or mask[row] != 0; NaN when no row is selected. dpred (optional, [rows, cols], overwritten) =
// grad_scale · 2 (pred − target) / (selected · cols) on selected rows, 0 elsewhere.
Status mse(float* loss, float* dpred, const float* pred, const float* target, const uint8_t* mask, MseDims d);

Status run(const ops::Mse<float>& p);

}  // namespace nf::cuda
