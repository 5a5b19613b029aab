// Binding for the optimizer ops: adamwStep / sgdStep / sumSquares / scale / clipGradNorm, all on
// flat buffers of n elements. Float32Array arguments run the ISA-dispatched kernels; Float64Array
// arguments run the float64 reference twin.
#include <cmath>
#include <string>
#include <type_traits>

#include "../cpu/optim.h"
#include "../cpu/ref/optim.h"
#include "args.h"
#include "registry.h"

namespace nf::napi {
namespace {

const double kBelowOne = std::nextafter(1.0, 0.0);

// A number the caller must give (Args::number returns the NaN default only when it is absent).
double required_number(Args& a, const char* name, double min = -1e300) {
  const double v = a.number(name, std::nan(""), min);
  if (std::isnan(v)) a.fail(std::string("expected a number for ") + name + " but received nothing");
  return v;
}

template <class T>
Job adamw_step(Args& a) {
  const int64_t n = a.dim("n", 0);
  cpu::AdamWParams p;
  p.step = a.dim("step", 1);
  p.lr = a.number("lr", p.lr, 0.0);
  p.beta1 = a.number("beta1", p.beta1, 0.0, kBelowOne);
  p.beta2 = a.number("beta2", p.beta2, 0.0, kBelowOne);
  p.eps = a.number("eps", p.eps, 0.0);
  p.weight_decay = a.number("weightDecay", p.weight_decay, 0.0);
  T* param = a.floats<T>("param", n);
  const T* grad = a.floats<T>("grad", n);
  T* exp_avg = a.floats<T>("expAvg", n);
  T* exp_avg_sq = a.floats<T>("expAvgSq", n);
  return [=]() -> Status {
    if constexpr (std::is_same_v<T, double>) {
      ref::adamw_step(param, exp_avg, exp_avg_sq, grad, n, p.lr, p.beta1, p.beta2, p.eps, p.weight_decay, p.step);
      return Status::Ok();
    } else {
      return cpu::adamw_step(param, exp_avg, exp_avg_sq, grad, n, p);
    }
  };
}

template <class T>
Job sgd_step(Args& a) {
  const int64_t n = a.dim("n", 0);
  cpu::SgdParams p;
  p.step = a.dim("step", 1);
  p.lr = a.number("lr", p.lr, 0.0);
  p.momentum = a.number("momentum", p.momentum, 0.0);
  p.dampening = a.number("dampening", p.dampening);
  p.weight_decay = a.number("weightDecay", p.weight_decay, 0.0);
  p.nesterov = a.flag("nesterov", p.nesterov);
  if (p.nesterov && (p.momentum == 0 || p.dampening != 0))
    a.fail("nesterov requires a momentum > 0 and a dampening of 0");
  T* param = a.floats<T>("param", n);
  const T* grad = a.floats<T>("grad", n);
  T* buf = p.momentum != 0 ? a.floats<T>("momentumBuf", n) : a.floats_opt<T>("momentumBuf", n);
  return [=]() -> Status {
    if constexpr (std::is_same_v<T, double>) {
      ref::sgd_step(param, buf, grad, n, p.lr, p.momentum, p.dampening, p.weight_decay, p.nesterov, p.step);
      return Status::Ok();
    } else {
      return cpu::sgd_step(param, buf, grad, n, p);
    }
  };
}

template <class T>
Job sum_squares(Args& a) {
  const int64_t n = a.dim("n", 0);
  T* out = a.floats<T>("out", 1);
  const T* x = a.floats<T>("x", n);
  return [=]() -> Status {
    if constexpr (std::is_same_v<T, double>) {
      *out = ref::sum_squares(x, n);
      return Status::Ok();
    } else {
      return cpu::sum_squares(out, x, n);
    }
  };
}

template <class T>
Job scale(Args& a) {
  const int64_t n = a.dim("n", 0);
  const double s = required_number(a, "s");
  T* x = a.floats<T>("x", n);
  return [=]() -> Status {
    if constexpr (std::is_same_v<T, double>) {
      ref::scale(x, n, s);
      return Status::Ok();
    } else {
      return cpu::scale(x, n, static_cast<float>(s));
    }
  };
}

template <class T>
Job clip_grad_norm(Args& a) {
  const int64_t n = a.dim("n", 0);
  const double max_norm = required_number(a, "maxNorm", 0.0);
  T* total_norm = a.floats<T>("totalNorm", 1);
  T* grad = a.floats<T>("grad", n);
  return [=]() -> Status {
    if constexpr (std::is_same_v<T, double>) {
      *total_norm = static_cast<T>(ref::clip_grad_norm(grad, n, max_norm));
      return Status::Ok();
    } else {
      return cpu::clip_grad_norm(total_norm, grad, n, max_norm);
    }
  };
}

Job parse_adamw(Args& a) { return a.is_f64("param") ? adamw_step<double>(a) : adamw_step<float>(a); }
Job parse_sgd(Args& a) { return a.is_f64("param") ? sgd_step<double>(a) : sgd_step<float>(a); }
Job parse_sum_squares(Args& a) { return a.is_f64("x") ? sum_squares<double>(a) : sum_squares<float>(a); }
Job parse_scale(Args& a) { return a.is_f64("x") ? scale<double>(a) : scale<float>(a); }
Job parse_clip(Args& a) { return a.is_f64("grad") ? clip_grad_norm<double>(a) : clip_grad_norm<float>(a); }

}  // namespace

NF_REGISTER_OPS(optim) {
  register_op(env, exports, "adamwStep", parse_adamw);
  register_op(env, exports, "sgdStep", parse_sgd);
  register_op(env, exports, "sumSquares", parse_sum_squares);
  register_op(env, exports, "scale", parse_scale);
  register_op(env, exports, "clipGradNorm", parse_clip);
}

}  // namespace nf::napi
