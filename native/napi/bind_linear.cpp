// Binding for the GEMM and the Linear layer: gemm / linearForward / linearBackward.
// Float32Array arguments run the ISA-dispatched kernels; Float64Array arguments run the float64
// reference twins (native/cpu/ref/linear.h). gemm's operands are packed unless the optional
// lda/ldb/ldc (row strides) and strideA/strideB/strideC (batch strides) say otherwise; each array
// then holds exactly the extent those strides span (preact is laid out like C).
#include <algorithm>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "../cpu/linear.h"
#include "../cpu/ref/linear.h"
#include "args.h"
#include "registry.h"

namespace nf::napi {
namespace {

constexpr int64_t kMaxElements = int64_t(1) << 48;

cpu::Act activation(Args& a) {
  const std::string name = a.text("act", "none");
  if (name == "none") return cpu::Act::none;
  if (name == "relu") return cpu::Act::relu;
  if (name == "gelu") return cpu::Act::gelu;
  if (name == "gelu_tanh") return cpu::Act::gelu_tanh;
  a.fail("expected 'none', 'relu', 'gelu' or 'gelu_tanh' for act but received '" + name + "'");
}

// The element count of a tensor of the given dims, failing (naming `name`) beyond 2^48.
int64_t elements(Args& a, const char* name, std::initializer_list<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d != 0 && n > kMaxElements / d) a.fail(std::string("the dims give too many elements for ") + name);
    n *= d;
  }
  return n;
}

// One gemm operand: `batch` entries of `rows` rows of `cols` values, rows `ld` apart, entries
// `stride` apart (packed when the fields are absent); its array holds exactly that extent.
struct Operand {
  int64_t ld, stride, extent;
};
Operand operand(Args& a, const char* name, const char* ld_name, const char* stride_name, int64_t batch,
                int64_t rows, int64_t cols) {
  Operand o;
  o.ld = a.integer(ld_name, cols, std::max<int64_t>(cols, 1), kMaxElements);
  o.stride = a.integer(stride_name, elements(a, name, {rows, o.ld}), 0, kMaxElements);
  o.extent = rows == 0 || cols == 0
                 ? 0
                 : elements(a, name, {batch - 1, o.stride}) + elements(a, name, {rows - 1, o.ld}) + cols;
  if (o.extent > kMaxElements) a.fail(std::string("the dims give too many elements for ") + name);
  return o;
}

template <class T>
Job gemm(Args& a) {
  const int64_t M = a.dim("M", 0), N = a.dim("N", 0), K = a.dim("K", 0);
  const int64_t batch = a.integer("batch", 1, 1, kMaxElements);
  const bool transA = a.flag("transA", false), transB = a.flag("transB", false);
  const double alpha = a.number("alpha", 1.0), beta = a.number("beta", 0.0);
  const cpu::Act act = activation(a);
  // Stored shapes: A [M, K] ([K, M] when transA), B [K, N] ([N, K] when transB), C [M, N].
  const Operand oa = operand(a, "A", "lda", "strideA", batch, transA ? K : M, transA ? M : K);
  const Operand ob = operand(a, "B", "ldb", "strideB", batch, transB ? N : K, transB ? K : N);
  const Operand oc = operand(a, "C", "ldc", "strideC", batch, M, N);
  if (batch > 1 && M > 0 && N > 0 && oc.stride < (M - 1) * oc.ld + N)
    a.fail("strideC is too small: the batch entries of C would overlap");
  T* C = a.floats<T>("C", oc.extent);
  T* preact = a.floats_opt<T>("preact", oc.extent);
  const T* A = a.floats<T>("A", oa.extent);
  const T* B = a.floats<T>("B", ob.extent);
  const T* bias = a.floats_opt<T>("bias", N);
  return [=]() -> Status {
    if constexpr (std::is_same_v<T, double>) {
      ref::gemm_strided(C, preact, A, B, bias, M, N, K, transA, transB, alpha, beta, static_cast<int>(act), batch,
                        oa.ld, ob.ld, oc.ld, oa.stride, ob.stride, oc.stride);
      return Status::Ok();
    } else {
      cpu::GemmDims d;
      d.M = M, d.N = N, d.K = K;
      d.transA = transA, d.transB = transB;
      d.lda = oa.ld, d.ldb = ob.ld, d.ldc = oc.ld;
      d.batch = batch, d.strideA = oa.stride, d.strideB = ob.stride, d.strideC = oc.stride;
      d.alpha = static_cast<float>(alpha), d.beta = static_cast<float>(beta);
      d.act = act;
      return cpu::gemm(C, preact, A, B, bias, d);
    }
  };
}

template <class T>
Job linear_forward(Args& a) {
  const int64_t rows = a.dim("rows", 0), in = a.dim("inFeatures"), out = a.dim("outFeatures");
  const cpu::Act act = activation(a);
  T* y = a.floats<T>("y", elements(a, "y", {rows, out}));
  T* preact = a.floats_opt<T>("preact", elements(a, "preact", {rows, out}));
  const T* x = a.floats<T>("x", elements(a, "x", {rows, in}));
  const T* W = a.floats<T>("W", elements(a, "W", {out, in}));
  const T* b = a.floats_opt<T>("b", out);
  return [=]() -> Status {
    if constexpr (std::is_same_v<T, double>) {
      ref::linear_forward(y, x, W, b, rows, in, out, static_cast<int>(act), preact);
      return Status::Ok();
    } else {
      return cpu::linear_forward(y, preact, x, W, b, {rows, in, out}, act);
    }
  };
}

template <class T>
Job linear_backward(Args& a) {
  const int64_t rows = a.dim("rows", 0), in = a.dim("inFeatures"), out = a.dim("outFeatures");
  T* dx = a.floats_opt<T>("dx", elements(a, "dx", {rows, in}));
  T* dW = a.floats<T>("dW", elements(a, "dW", {out, in}));
  T* db = a.floats_opt<T>("db", out);
  const T* dy = a.floats<T>("dy", elements(a, "dy", {rows, out}));
  const T* x = a.floats<T>("x", elements(a, "x", {rows, in}));
  const T* W = a.floats<T>("W", elements(a, "W", {out, in}));
  return [=]() -> Status {
    if constexpr (std::is_same_v<T, double>) {
      ref::linear_backward(dx, dW, db, dy, x, W, rows, in, out);
      return Status::Ok();
    } else {
      return cpu::linear_backward(dx, dW, db, dy, x, W, {rows, in, out});
    }
  };
}

Job parse_gemm(Args& a) { return a.is_f64("A") ? gemm<double>(a) : gemm<float>(a); }
Job parse_forward(Args& a) { return a.is_f64("x") ? linear_forward<double>(a) : linear_forward<float>(a); }
Job parse_backward(Args& a) { return a.is_f64("x") ? linear_backward<double>(a) : linear_backward<float>(a); }

}  // namespace

NF_REGISTER_OPS(linear) {
  register_op(env, exports, "gemm", parse_gemm);
  register_op(env, exports, "linearForward", parse_forward);
  register_op(env, exports, "linearBackward", parse_backward);
}

}  // namespace nf::napi
