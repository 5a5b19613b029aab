// Training losses with their gradients fused in: softmax cross-entropy over logits (PyTorch's
// F.cross_entropy with label smoothing and ignore_index, mean reduction) and mean squared error
// over (optionally masked) rows.
#pragma once
#include <cstdint>

#include "kernel_decl.h"

namespace nf::cpu {

struct CrossEntropyDims {
  int64_t N = 0;                 // rows (B*T flattened), one target each
  int64_t V = 0;                 // classes (vocabulary size)
  double label_smoothing = 0.0;  // ε in [0, 1]
  int32_t ignore_index = -100;   // rows whose target equals this are left out of the mean
  double grad_scale = 1.0;       // dlogits is multiplied by this (loss scaling, accumulation)
};

// loss[0] = mean over non-ignored rows i of (1−ε)(−log p_i[t_i]) + ε·mean_c(−log p_i[c]),
// p_i = softmax(logits[i]); NaN when every row is ignored (as PyTorch). dlogits (optional, [N, V],
// overwritten) = grad_scale · d loss / d logits; ignored rows get zeros. logits [N, V], targets [N].
Status cross_entropy(float* loss, float* dlogits, const float* logits, const int32_t* targets, CrossEntropyDims d);

// Ok when every target is ignore_index or lies in [0, V); otherwise an error naming the first bad
// row. cross_entropy runs it itself; exposed so the float64 reference path can share it.
Status cross_entropy_check_targets(const int32_t* targets, const CrossEntropyDims& d);

struct MseDims {
  int64_t rows = 0;
  int64_t cols = 0;
  double grad_scale = 1.0;
};

// loss[0] = Σ_selected (pred − target)² / (selected rows · cols), where a row is selected when
// mask is null or mask[row] != 0; NaN when no row is selected (the mean of nothing, as PyTorch).
// dpred (optional, [rows, cols], overwritten) = grad_scale · 2 (pred − target) / (selected · cols)
// on selected rows, 0 elsewhere. pred, target [rows, cols]; mask [rows].
Status mse(float* loss, float* dpred, const float* pred, const float* target, const uint8_t* mask, MseDims d);

NF_KERNEL_DECL(void cross_entropy(float* loss, float* dlogits, const float* logits, const int32_t* targets,
                                  const CrossEntropyDims& d))
NF_KERNEL_DECL(void mse(float* loss, float* dpred, const float* pred, const float* target, const uint8_t* mask,
                        const MseDims& d))

}  // namespace nf::cpu
