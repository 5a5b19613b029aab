// Reference ops on logits: plain scalar loops in double, templated on the storage type. The math
// and the argmax / top-k order are in ../../ops/logits.h; top-k here sorts the whole row (stably,
// by that order), the kernels select.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "../../ops/logits.h"

namespace nf::ref {

// out = softmax(x) or log_softmax(x) over one row of n values.
template <class T>
void softmax_row(T* out, const T* x, int64_t n, bool log) {
  double m = x[0], s = 0;
  for (int64_t c = 1; c < n; ++c) m = std::max(m, double(x[c]));
  for (int64_t c = 0; c < n; ++c) s += std::exp(double(x[c]) - m);
  for (int64_t c = 0; c < n; ++c)
    out[c] = static_cast<T>(log ? double(x[c]) - m - std::log(s) : std::exp(double(x[c]) - m) / s);
}

// The row's indices in ops::logit_before's order.
template <class T>
std::vector<int32_t> logit_order(const T* x, int64_t n) {
  std::vector<int32_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [x](int32_t i, int32_t j) { return ops::logit_before(x[i], i, x[j], j); });
  return order;
}

// The ops (native/ops/logits.h).
template <class T>
void run(const ops::Softmax<T>& p) {
  for (int64_t r = 0; r < p.rows; ++r) softmax_row(p.out + r * p.cols, p.x + r * p.cols, p.cols, false);
}
template <class T>
void run(const ops::LogSoftmax<T>& p) {
  for (int64_t r = 0; r < p.rows; ++r) softmax_row(p.out + r * p.cols, p.x + r * p.cols, p.cols, true);
}
template <class T>
void run(const ops::Argmax<T>& p) {
  for (int64_t r = 0; r < p.rows; ++r) p.out[r] = logit_order(p.x + r * p.cols, p.cols)[0];
}
template <class T>
void run(const ops::Topk<T>& p) {
  for (int64_t r = 0; r < p.rows; ++r) {
    const T* x = p.x + r * p.cols;
    const std::vector<int32_t> order = logit_order(x, p.cols);
    for (int64_t i = 0; i < p.k; ++i) {
      p.indices[r * p.k + i] = order[size_t(i)];
      p.values[r * p.k + i] = x[order[size_t(i)]];
    }
  }
}

}  // namespace nf::ref
