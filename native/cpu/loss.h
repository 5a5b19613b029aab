// Training losses with their gradients fused in: softmax cross-entropy over logits (PyTorch's
// F.cross_entropy with label smoothing and ignore_index, mean reduction) and mean squared error
// over (optionally masked) rows.
#pragma once
#include <cstdint>

#include "../ops/loss.h"
#include "kernel_decl.h"

namespace nf::cpu {

using CrossEntropyDims = ops::CrossEntropyDims;
using MseDims = ops::MseDims;
using ops::cross_entropy_check_targets;

// The crossEntropy op: loss[0] = mean over non-ignored rows i of (1−ε)(−log p_i[t_i]) +
// ε·mean_c(−log p_i[c]), p_i = softmax(logits[i]); NaN when every row is ignored (as PyTorch).
// dlogits (optional, [N, V], overwritten) = grad_scale · d loss / d logits; ignored rows get zeros.
// Checks the targets first.
Status run(const ops::CrossEntropy<float>& p);

// The mse op: loss[0] = Σ_selected (pred − target)² / (selected rows · cols), where a row is
// selected when mask is null or mask[row] != 0; NaN when no row is selected. dpred (optional,
// [rows, cols], overwritten) = grad_scale · 2 (pred − target) / (selected · cols) on selected rows,
// 0 elsewhere.
Status run(const ops::Mse<float>& p);

NF_KERNEL_DECL(void cross_entropy(float* loss, float* dlogits, const float* logits, const int32_t* targets,
                                  const CrossEntropyDims& d))
NF_KERNEL_DECL(void mse(float* loss, float* dpred, const float* pred, const float* target, const uint8_t* mask,
                        const MseDims& d))

}  // namespace nf::cpu
