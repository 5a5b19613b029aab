// The CPU addon's ops, all of them, from the op table (native/ops/ops.h): for each op, a function
// `name(options)` (and `nameAsync`, see register_op) that reads the options object through the
// op's schema (native/napi/op_reader.h) and runs
//   - the ISA-dispatched kernel cpu::run(const Op<float>&) when the float tensors are Float32Array,
//   - the float64 reference twin ref::run(const Op<double>&) when they are Float64Array (most of
//     the float tensors every call gives decide, see is_f64_call); ops without a twin take
//     Float32Array only;
//   - cpu::run(const Op<bf16>&) when any of its arrays is a Uint16Array (bfloat16 activations, for
//     the ops with such a kernel: the op's fields say which arrays are then bf16 (T) and which float32
//     (Acc<T>)); an op without one reads a Uint16Array as an invalid argument naming the field.
// Also exports opSchema(): the JSON of every op's fields (native/ops/recorder.h) with, per op,
// whether it has a reference twin: what scripts/gen_native_types.js turns into the TypeScript
// interface, and what lib/core/device.ts's supports(op, 'cpu') reads.
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../ops.h"
#include "../ref/ops.h"
#include "../../core/threadpool.h"
#include "../../ops/recorder.h"
#include "../../napi/op_reader.h"
#include "../../napi/op_table.h"
#include "../../napi/registry.h"

namespace nf::napi {
namespace {

// Whether the CPU backend has a kernel for params type P (Op<bf16>: bfloat16 activations).
template <class P, class = void>
struct has_cpu : std::false_type {};
template <class P>
struct has_cpu<P, std::void_t<decltype(cpu::run(std::declval<const P&>()))>> : std::true_type {};

// Whether the reference backend has a twin for params type P.
template <class P, class = void>
struct has_ref : std::false_type {};
template <class P>
struct has_ref<P, std::void_t<decltype(ref::run(std::declval<const P&>()))>> : std::true_type {};

// A kernel's result as a Status (the reference twins return nothing).
template <class F>
Status status_of(F&& run) {
  if constexpr (std::is_void_v<decltype(run())>) {
    run();
    return Status::Ok();
  } else {
    return run();
  }
}

// The float tensors every call of Op must give: most of them decide the call's precision.
template <template <class> class Op>
std::vector<std::string> precision_fields() {
  ops::Recorder probe;
  Op<float> p;
  Op<float>::fields(probe, p);
  return probe.required_real();
}

// Whether a call is float64: most of its required float tensors are Float64Array (so in a call
// that mixes the two, the odd ones out are the fields its error names).
bool is_f64_call(Args& a, const std::vector<std::string>& fields) {
  int f64 = 0;
  for (const std::string& f : fields) f64 += a.is_f64(f.c_str()) ? 1 : -1;
  return f64 > 0;
}

template <class T, template <class> class Op>
Job read(Args& a) {
  Op<T> p;
  OpReader<T, HostSource> r(a, HostSource{a});
  Op<T>::fields(r, p);
  return [p]() -> Status {
    if constexpr (std::is_same_v<T, double>) {
      return status_of([&] { return ref::run(p); });
    } else {
      take_failure();  // (one reported before this op is not its own)
      Status s = status_of([&] { return cpu::run(p); });
      if (take_failure() && s.ok())  // a kernel skipped work its thread had no scratch buffer for
        return Status::Error(Op<T>::name, "out of memory: a thread's scratch buffer for this op could not be allocated, so "
                                          "its result would be incomplete (free memory, or use fewer threads or a smaller batch)");
      return s;
    }
  };
}

template <template <class> class Op>
Job parse(Args& a) {
  if constexpr (has_cpu<Op<ops::bf16>>::value)
    if (a.any_bf16()) return read<ops::bf16, Op>(a);
  if constexpr (has_ref<Op<double>>::value) {
    static const std::vector<std::string> fields = precision_fields<Op>();
    if (is_f64_call(a, fields)) return read<double, Op>(a);
  }
  return read<float, Op>(a);
}

// Registers op Op; its schema entry also says whether it has a reference twin and a kernel for
// bfloat16 activations.
struct Register {
  Napi::Env env;
  Napi::Object exports;
  template <template <class> class Op>
  std::optional<std::string> operator()() {
    register_op(env, exports, Op<float>::name, parse<Op>);
    return std::string(", \"reference\": ") + (has_ref<Op<double>>::value ? "true" : "false") +
           ", \"bf16\": " + (has_cpu<Op<ops::bf16>>::value ? "true" : "false");
  }
};

}  // namespace

NF_REGISTER_OPS(ops) { register_op_table(env, exports, Register{env, exports}); }

}  // namespace nf::napi
