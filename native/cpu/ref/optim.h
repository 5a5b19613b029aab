// Reference optimizer steps and gradient-norm reductions: plain scalar loops in double, templated
// on the storage type, in the order of torch.optim.AdamW / torch.optim.SGD /
// torch.nn.utils.clip_grad_norm_ (see ../optim.h).
#pragma once
#include <cmath>
#include <cstdint>

#include "../../ops/optim.h"

namespace nf::ref {

template <class T>
void adamw_step(T* param, T* exp_avg, T* exp_avg_sq, const T* grad, int64_t n, double lr, double beta1,
                double beta2, double eps, double weight_decay, int64_t step) {
  const double bc1 = 1 - std::pow(beta1, double(step)), bc2 = 1 - std::pow(beta2, double(step));
  for (int64_t i = 0; i < n; ++i) {
    const double g = grad[i];
    double p = param[i] * (1 - lr * weight_decay);
    double m = exp_avg[i] + (1 - beta1) * (g - exp_avg[i]);
    double v = exp_avg_sq[i] * beta2 + (1 - beta2) * g * g;
    p -= lr / bc1 * m / (std::sqrt(v) / std::sqrt(bc2) + eps);
    param[i] = static_cast<T>(p);
    exp_avg[i] = static_cast<T>(m);
    exp_avg_sq[i] = static_cast<T>(v);
  }
}

template <class T>
void sgd_step(T* param, T* momentum_buf, const T* grad, int64_t n, double lr, double momentum, double dampening,
              double weight_decay, bool nesterov, int64_t step) {
  for (int64_t i = 0; i < n; ++i) {
    double d = grad[i] + weight_decay * param[i];
    if (momentum != 0) {
      const double buf = step == 1 ? d : momentum * momentum_buf[i] + (1 - dampening) * d;
      momentum_buf[i] = static_cast<T>(buf);
      d = nesterov ? d + momentum * buf : buf;
    }
    param[i] = static_cast<T>(param[i] - lr * d);
  }
}

template <class T>
double sum_squares(const T* x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += double(x[i]) * x[i];
  return s;
}

template <class T>
void scale(T* x, int64_t n, double s) {
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<T>(x[i] * s);
}

// Returns the total norm; scales grad by min(coef, 1), NaN included.
template <class T>
double clip_grad_norm(T* grad, int64_t n, double max_norm) {
  const double total = std::sqrt(sum_squares(grad, n)), coef = ops::clip_coefficient(max_norm, total);
  if (!(coef >= 1)) scale(grad, n, coef);
  return total;
}

// The ops (native/ops/optim.h).
template <class T>
void run(const ops::AdamWStep<T>& p) {
  const ops::AdamWParams h = ops::with_step_values(p.h);
  adamw_step(p.param, p.exp_avg, p.exp_avg_sq, p.grad, p.n, h.lr, h.beta1, h.beta2, h.eps, h.weight_decay, h.step);
}
template <class T>
void run(const ops::AdamWMultiStep<T>& p) {
  const ops::AdamWParams h = ops::with_step_values(p.h);
  for (size_t i = 0; i < p.sizes.size(); ++i) {
    adamw_step(p.param[i], p.exp_avg[i], p.exp_avg_sq[i], p.grad[i], p.sizes[i], h.lr, h.beta1, h.beta2, h.eps,
               h.weight_decay, h.step);
    for (int64_t j = 0; p.copy[i] && j < p.sizes[i]; ++j) p.copy[i][j] = p.param[i][j];
  }
}
template <class T>
void run(const ops::SgdStep<T>& p) {
  sgd_step(p.param, p.momentum_buf, p.grad, p.n, p.h.lr, p.h.momentum, p.h.dampening, p.h.weight_decay,
           p.h.nesterov, p.h.step);
}
template <class T>
void run(const ops::SumSquares<T>& p) {
  *p.out = static_cast<T>(sum_squares(p.x, p.n));
}
template <class T>
void run(const ops::Scale<T>& p) {
  scale(p.x, p.n, p.s);
}
template <class T>
void run(const ops::ClipGradNorm<T>& p) {
  *p.total_norm = static_cast<T>(clip_grad_norm(p.grad, p.n, p.max_norm));
}

template <class T>
void run(const ops::ClipCoefficient<T>& p) {
  double s = 0.0;
  for (int64_t i = 0; i < p.n; ++i) s += static_cast<double>(p.sums[i]);
  const double total = std::sqrt(s);
  *p.coef = ops::clip_coefficient(p.max_norm, total);
  *p.total_norm = static_cast<T>(total);
}
template <class T>
void run(const ops::ClipScale<T>& p) {
  if (!(*p.coef >= 1)) scale(p.x, p.n, *p.coef);
}

}  // namespace nf::ref
