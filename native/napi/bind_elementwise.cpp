// Binding for the elementwise ops: add, accumulate, dropoutForward, dropoutBackward.
// Float32Array arguments run the ISA-dispatched kernels; Float64Array arguments the reference twin.
#include <cstdint>
#include <string>
#include <type_traits>

#include "../cpu/elementwise.h"
#include "../cpu/ref/elementwise.h"
#include "args.h"
#include "registry.h"

namespace nf::napi {
namespace {

constexpr int64_t kMaxSafeInteger = (int64_t(1) << 53) - 1;

template <class T>
Job add(Args& a) {
  int64_t n = a.dim("n", 0);
  T* out = a.floats<T>("out", n);
  const T* x = a.floats<T>("a", n);
  const T* y = a.floats<T>("b", n);
  return [=]() -> Status {
    if constexpr (std::is_same_v<T, double>) {
      ref::add(out, x, y, n);
      return Status::Ok();
    } else {
      return cpu::add(out, x, y, n);
    }
  };
}

template <class T>
Job accumulate(Args& a) {
  int64_t n = a.dim("n", 0);
  T* y = a.floats<T>("y", n);
  const T* x = a.floats<T>("x", n);
  return [=]() -> Status {
    if constexpr (std::is_same_v<T, double>) {
      ref::add(y, y, x, n);
      return Status::Ok();
    } else {
      return cpu::accumulate(y, x, n);
    }
  };
}

// Reads n, p, seed, offset. p is used as a float by both precisions, so their masks agree.
cpu::DropoutDims dropout_dims(Args& a) {
  cpu::DropoutDims d;
  d.n = a.dim("n", 0);
  double p = a.number("p", 0.0, 0.0, 1.0);
  d.p = static_cast<float>(p);
  if (!(d.p < 1.0f)) a.fail("expected a number in [0, 1) for p but received " + std::to_string(p));
  d.seed = static_cast<uint64_t>(a.dim("seed", 0, kMaxSafeInteger));
  d.offset = static_cast<uint64_t>(a.dim("offset", 0, kMaxSafeInteger));
  return d;
}

// dropoutForward {out, x} and dropoutBackward {dx, dout} apply the same map.
template <class T>
Job dropout(Args& a, const char* out_name, const char* in_name, bool forward) {
  cpu::DropoutDims d = dropout_dims(a);
  T* out = a.floats<T>(out_name, d.n);
  const T* x = a.floats<T>(in_name, d.n);
  return [=]() -> Status {
    if constexpr (std::is_same_v<T, double>) {
      ref::dropout(out, x, d.n, d.p, d.seed, d.offset);
      return Status::Ok();
    } else {
      return forward ? cpu::dropout_forward(out, x, d) : cpu::dropout_backward(out, x, d);
    }
  };
}

Job parse_add(Args& a) { return a.is_f64("a") ? add<double>(a) : add<float>(a); }
Job parse_accumulate(Args& a) { return a.is_f64("x") ? accumulate<double>(a) : accumulate<float>(a); }
Job parse_dropout_forward(Args& a) {
  return a.is_f64("x") ? dropout<double>(a, "out", "x", true) : dropout<float>(a, "out", "x", true);
}
Job parse_dropout_backward(Args& a) {
  return a.is_f64("dout") ? dropout<double>(a, "dx", "dout", false) : dropout<float>(a, "dx", "dout", false);
}

}  // namespace

NF_REGISTER_OPS(elementwise) {
  register_op(env, exports, "add", parse_add);
  register_op(env, exports, "accumulate", parse_accumulate);
  register_op(env, exports, "dropoutForward", parse_dropout_forward);
  register_op(env, exports, "dropoutBackward", parse_dropout_backward);
}

}  // namespace nf::napi
