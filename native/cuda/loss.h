// Softmax cross-entropy on the GPU (PyTorch's F.cross_entropy with label smoothing, ignore_index
// and mean reduction), the loss and its gradient fused: the arguments and semantics the CPU backend
// uses (native/ops/loss.h), on device pointers.
#pragma once
#include <cstdint>

#include "../core/status.h"
#include "../ops/loss.h"

namespace nf::cuda {

using CrossEntropyDims = ops::CrossEntropyDims;

// loss[0] = mean over non-ignored rows i of (1−ε)(−log p_i[t_i]) + ε·mean_c(−log p_i[c]),
// p_i = softmax(logits[i]); NaN when every row is ignored (as PyTorch). dlogits (optional, [N, V],
// overwritten) = grad_scale · d loss / d logits; ignored rows get zeros. logits [N, V], targets
// int32 [N], loss [1], all on the device. Waits for the stream, to report a target outside [0, V)
// (other than ignore_index) as an error naming its row.
// (bf16: logits and dlogits in bfloat16, precision 'bf16'; the loss and the math float.)
Status cross_entropy(float* loss, float* dlogits, const float* logits, const int32_t* targets, CrossEntropyDims d);
Status cross_entropy(float* loss, ops::bf16* dlogits, const ops::bf16* logits, const int32_t* targets,
                     CrossEntropyDims d);

// The crossEntropy op (native/ops/loss.h). (No mse kernel yet.)
Status run(const ops::CrossEntropy<float>& p);
Status run(const ops::CrossEntropy<ops::bf16>& p);

}  // namespace nf::cuda
