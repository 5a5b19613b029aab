// Binding for the feed-forward network: feedforwardForward / feedforwardBackward. Float32Array
// arguments run the ISA-dispatched kernels; Float64Array arguments run the float64 reference twin.
#include <string>
#include <type_traits>

#include "../cpu/feedforward.h"
#include "../cpu/ref/feedforward.h"
#include "args.h"
#include "registry.h"

namespace nf::napi {
namespace {

constexpr int64_t kMaxSafeInteger = (int64_t(1) << 53) - 1;
// A plausibility bound on the widths D and F (rejected naming the dim); the array lengths go
// through Args::count, which rules out overflow whatever the dims.
constexpr int64_t kMaxWidth = int64_t(1) << 20;

cpu::FeedForwardDims read_dims(Args& args) {
  cpu::FeedForwardDims d;
  d.rows = args.dim("rows", 0);
  d.D = args.dim("D", 1, kMaxWidth);
  d.F = args.dim("F", 1, kMaxWidth);
  std::string act = args.text("activation", "gelu");
  if (act == "gelu") d.activation = cpu::Act::gelu;
  else if (act == "gelu_tanh") d.activation = cpu::Act::gelu_tanh;
  else if (act == "relu") d.activation = cpu::Act::relu;
  else args.fail("expected 'gelu', 'gelu_tanh' or 'relu' for activation but received '" + act + "'");
  d.dropout = static_cast<float>(args.number("dropout", 0.0, 0.0, 1.0));
  d.seed = static_cast<uint64_t>(args.integer("seed", 0, 0, kMaxSafeInteger));
  d.offset = static_cast<uint64_t>(args.integer("offset", 0, 0, kMaxSafeInteger));
  return d;
}

template <class T>
Job feedforward_forward(Args& args) {
  const cpu::FeedForwardDims d = read_dims(args);
  const int64_t rows = d.rows, D = d.D, F = d.F;
  const int64_t nx = args.count({rows, D}), nh = args.count({rows, F}), nw = args.count({F, D});
  T* y = args.floats<T>("y", nx);
  T* h = args.floats_opt<T>("h", nh);
  T* a = args.floats<T>("a", nh);
  const T* x = args.floats<T>("x", nx);
  const T* W1 = args.floats<T>("W1", nw);
  const T* b1 = args.floats<T>("b1", F);
  const T* W2 = args.floats<T>("W2", nw);
  const T* b2 = args.floats<T>("b2", D);
  return [=]() -> Status {
    if constexpr (std::is_same_v<T, double>) {
      ref::feedforward_forward(y, h, a, x, W1, b1, W2, b2, rows, D, F, static_cast<int>(d.activation), d.dropout,
                               d.seed, d.offset);
      return Status::Ok();
    } else {
      return cpu::feedforward_forward(y, h, a, x, W1, b1, W2, b2, d);
    }
  };
}

template <class T>
Job feedforward_backward(Args& args) {
  const cpu::FeedForwardDims d = read_dims(args);
  const int64_t rows = d.rows, D = d.D, F = d.F;
  const int64_t nx = args.count({rows, D}), nh = args.count({rows, F}), nw = args.count({F, D});
  T* dx = args.floats<T>("dx", nx);
  T* dW1 = args.floats<T>("dW1", nw);
  T* db1 = args.floats<T>("db1", F);
  T* dW2 = args.floats<T>("dW2", nw);
  T* db2 = args.floats<T>("db2", D);
  const T* dy = args.floats<T>("dy", nx);
  const T* x = args.floats<T>("x", nx);
  const T* h = args.floats<T>("h", nh);
  const T* a = args.floats<T>("a", nh);
  const T* W1 = args.floats<T>("W1", nw);
  const T* W2 = args.floats<T>("W2", nw);
  return [=]() -> Status {
    if constexpr (std::is_same_v<T, double>) {
      ref::feedforward_backward(dx, dW1, db1, dW2, db2, dy, x, h, a, W1, W2, rows, D, F,
                                static_cast<int>(d.activation), d.dropout, d.seed, d.offset);
      return Status::Ok();
    } else {
      return cpu::feedforward_backward(dx, dW1, db1, dW2, db2, dy, x, h, a, W1, W2, d);
    }
  };
}

Job parse_forward(Args& args) {
  return args.is_f64("x") ? feedforward_forward<double>(args) : feedforward_forward<float>(args);
}
Job parse_backward(Args& args) {
  return args.is_f64("x") ? feedforward_backward<double>(args) : feedforward_backward<float>(args);
}

}  // namespace

NF_REGISTER_OPS(feedforward) {
  register_op(env, exports, "feedforwardForward", parse_forward);
  register_op(env, exports, "feedforwardBackward", parse_backward);
}

}  // namespace nf::napi
