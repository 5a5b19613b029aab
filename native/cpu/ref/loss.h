// Reference losses: plain scalar loops in double, templated on the storage type. The math is in
// ../loss.cpp's header and PyTorch's F.cross_entropy / F.mse_loss. Targets are assumed valid
// (cpu::cross_entropy_check_targets).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "../../ops/loss.h"

namespace nf::ref {

template <class T>
void cross_entropy(T* loss, T* dlogits, const T* logits, const int32_t* targets, int64_t N, int64_t V,
                   double label_smoothing, int32_t ignore_index, double grad_scale) {
  const double eps = label_smoothing;
  int64_t count = 0;
  for (int64_t r = 0; r < N; ++r) count += targets[r] != ignore_index;
  double total = 0;
  for (int64_t r = 0; r < N; ++r) {
    const T* x = logits + r * V;
    T* dx = dlogits ? dlogits + r * V : nullptr;
    const int32_t t = targets[r];
    if (t == ignore_index) {
      if (dx) std::fill(dx, dx + V, T(0));
      continue;
    }
    double m = x[0], s = 0, sx = 0;
    for (int64_t c = 1; c < V; ++c) m = std::max(m, double(x[c]));
    for (int64_t c = 0; c < V; ++c) {
      s += std::exp(x[c] - m);
      sx += x[c];
    }
    const double lse = m + std::log(s);
    total += (1 - eps) * (lse - x[t]) + eps * (lse - sx / V);
    if (dx)
      for (int64_t c = 0; c < V; ++c) {
        const double p = std::exp(x[c] - lse);
        dx[c] = static_cast<T>(grad_scale / count * (p - eps / V - (c == t ? 1 - eps : 0.0)));
      }
  }
  *loss = count ? static_cast<T>(total / count) : std::numeric_limits<T>::quiet_NaN();
}

template <class T>
void mse(T* loss, T* dpred, const T* pred, const T* target, const uint8_t* mask, int64_t rows, int64_t cols,
         double grad_scale) {
  int64_t selected = 0;
  for (int64_t r = 0; r < rows; ++r) selected += !mask || mask[r];
  const double n = double(selected) * cols;
  double total = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t i = r * cols + c;
      const bool on = !mask || mask[r];
      const double d = double(pred[i]) - target[i];
      if (on) total += d * d;
      if (dpred) dpred[i] = static_cast<T>(on ? grad_scale * 2 * d / n : 0.0);
    }
  *loss = selected ? static_cast<T>(total / n) : std::numeric_limits<T>::quiet_NaN();
}

// The ops (native/ops/loss.h).
template <class T>
void run(const ops::CrossEntropy<T>& p) {
  cross_entropy(p.loss, p.dlogits, p.logits, p.targets, p.d.N, p.d.V, p.d.label_smoothing, p.d.ignore_index,
                p.d.grad_scale);
}
template <class T>
void run(const ops::Mse<T>& p) {
  mse(p.loss, p.dpred, p.pred, p.target, p.mask, p.d.rows, p.d.cols, p.d.grad_scale);
}

}  // namespace nf::ref
