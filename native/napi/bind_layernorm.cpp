// Binding for LayerNorm: layernormForward / layernormBackward. Float32Array arguments run the
// ISA-dispatched kernels; Float64Array arguments run the float64 reference twin.
#include <type_traits>

#include "../cpu/layernorm.h"
#include "../cpu/ref/layernorm.h"
#include "args.h"
#include "registry.h"

namespace nf::napi {
namespace {

template <class T>
Job layernorm_forward(Args& a) {
  int64_t rows = a.dim("rows", 0), D = a.dim("D");
  const int64_t n = a.count({rows, D});
  double eps = a.number("eps", 1e-5, 1e-30, 1.0);
  T* out = a.floats<T>("out", n);
  T* mean = a.floats<T>("mean", rows);
  T* rstd = a.floats<T>("rstd", rows);
  const T* x = a.floats<T>("x", n);
  const T* residual = a.floats_opt<T>("residual", n);
  T* sum = residual ? a.floats<T>("sum", n) : nullptr;
  const T* gamma = a.floats<T>("gamma", D);
  const T* beta = a.floats<T>("beta", D);
  return [=]() -> Status {
    if constexpr (std::is_same_v<T, double>) {
      ref::layernorm_forward(out, sum, mean, rstd, x, residual, gamma, beta, rows, D, eps);
      return Status::Ok();
    } else {
      return cpu::layernorm_forward(out, sum, mean, rstd, x, residual, gamma, beta,
                                    {rows, D, static_cast<float>(eps)});
    }
  };
}

template <class T>
Job layernorm_backward(Args& a) {
  int64_t rows = a.dim("rows", 0), D = a.dim("D");
  const int64_t n = a.count({rows, D});
  T* dx = a.floats<T>("dx", n);
  T* dgamma = a.floats<T>("dgamma", D);
  T* dbeta = a.floats<T>("dbeta", D);
  const T* dout = a.floats<T>("dout", n);
  const T* dadd = a.floats_opt<T>("dadd", n);
  const T* x = a.floats<T>("x", n);
  const T* mean = a.floats<T>("mean", rows);
  const T* rstd = a.floats<T>("rstd", rows);
  const T* gamma = a.floats<T>("gamma", D);
  return [=]() -> Status {
    if constexpr (std::is_same_v<T, double>) {
      ref::layernorm_backward(dx, dgamma, dbeta, dout, dadd, x, mean, rstd, gamma, rows, D);
      return Status::Ok();
    } else {
      return cpu::layernorm_backward(dx, dgamma, dbeta, dout, dadd, x, mean, rstd, gamma, {rows, D, 1e-5f});
    }
  };
}

Job parse_forward(Args& a) { return a.is_f64("x") ? layernorm_forward<double>(a) : layernorm_forward<float>(a); }
Job parse_backward(Args& a) { return a.is_f64("x") ? layernorm_backward<double>(a) : layernorm_backward<float>(a); }

}  // namespace

NF_REGISTER_OPS(layernorm) {
  register_op(env, exports, "layernormForward", parse_forward);
  register_op(env, exports, "layernormBackward", parse_backward);
}

}  // namespace nf::napi
