// Ops on logits along the last axis on the GPU: softmax, log-softmax, argmax and top-k with the
// semantics of native/ops/logits.h, on device pointers, queued on the backend's stream.
#pragma once
#include "../core/status.h"
#include "../ops/logits.h"

namespace nf::cuda {

Status run(const ops::Softmax<float>& p);
Status run(const ops::LogSoftmax<float>& p);
Status run(const ops::Argmax<float>& p);
Status run(const ops::Topk<float>& p);

}  // namespace nf::cuda
