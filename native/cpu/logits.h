// Ops on logits along the last axis (native/ops/logits.h): softmax and log-softmax (vectorised,
// one variant per ISA), argmax and top-k (scalar: they are a compare per value).
#pragma once
#include <cstdint>

#include "../ops/logits.h"
#include "kernel_decl.h"

namespace nf::cpu {

// out[r] = softmax(x[r]) over each of `rows` rows of `cols` values.
Status run(const ops::Softmax<float>& p);
// out[r] = log_softmax(x[r]).
Status run(const ops::LogSoftmax<float>& p);
// out[r] = the first index of the largest value of x[r] (NaN counts as largest).
Status run(const ops::Argmax<float>& p);
// values[r], indices[r] = the k first values of x[r] in ops::logit_before's order, and their indices.
Status run(const ops::Topk<float>& p);

// One row: out = softmax(x) (log = false) or log_softmax(x) (log = true), cols values.
NF_KERNEL_DECL(void softmax_row(float* out, const float* x, int64_t cols, bool log))
// max of x[0..n) (NaN propagates as vmax/std::max do); −inf for n = 0. Also cross-entropy's first pass.
NF_KERNEL_DECL(float row_max(const float* x, int64_t n))

}  // namespace nf::cpu
