// The CUDA addon's ops: every op of the op table (native/ops/ops.h) that has a CUDA kernel
// (native/cuda/ops.h: a `run(const ops::X<float>&)` overload), under the CPU addon's name and
// fields (the same schema, read by the same reader, native/napi/op_reader.h) with device buffers in
// place of typed arrays. float32, and for the ops with a bf16 kernel (a `run(const ops::X<bf16>&)`
// overload: precision 'bf16') bfloat16 activations: a call whose options hold any bfloat16 buffer
// runs X<bf16>, whose fields say which arrays are bf16 (T) and which float32 (Acc<T>); a bf16 buffer
// given to an op without a bf16 kernel is an invalid argument naming the field. (The float64
// reference twins are the CPU addon's.)
// Also exports opSchema(): the JSON of the ops registered here (what supports(op, 'cuda') reads).
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "../ops.h"
#include "../../napi/op_reader.h"
#include "../../napi/op_table.h"
#include "../../napi/registry.h"
#include "device_args.h"

namespace nf::napi {
namespace {

// The CUDA addon's step from a name to a pointer: a device buffer of exactly `len` elements of E
// (at least, when at_least).
struct DeviceSource {
  static constexpr bool host_memory = false;  // the kernels check values (ids, targets) on the device
  DeviceArgs& a;
  template <class E>
  E* pointer(const char* name, int64_t len, bool optional, bool at_least) {
    using V = std::remove_const_t<E>;
    static_assert(sizeof(V) == 4 || sizeof(V) == 1 || std::is_same_v<V, double> || std::is_same_v<V, ops::bf16>,
                  "device buffers hold float32, bfloat16, int32, bool or (a result such as firstNonFinite's index) "
                  "float64");
    if (at_least && a.buf_length<V>(name) > len) len = a.buf_length<V>(name);
    return optional ? a.buf_opt<V>(name, len) : a.buf<V>(name, len);
  }
  template <class E>
  int64_t array_length(const char* name) {
    return a.buf_length<E>(name);
  }
};

// Whether the CUDA backend has a kernel for params type P.
template <class P, class = void>
struct has_cuda : std::false_type {};
template <class P>
struct has_cuda<P, std::void_t<decltype(cuda::run(std::declval<const P&>()))>> : std::true_type {};

template <template <class> class Op, class T>
Job parse_as(DeviceArgs& a) {
  Op<T> p;
  OpReader<T, DeviceSource> r(a, DeviceSource{a});
  Op<T>::fields(r, p);
  return [p] { return cuda::run(p); };
}

template <template <class> class Op>
Job parse_device(DeviceArgs& a) {
  if constexpr (has_cuda<Op<ops::bf16>>::value)
    if (a.any_bf16()) return parse_as<Op, ops::bf16>(a);
  return parse_as<Op, float>(a);
}

// Registers op Op when the CUDA backend has a kernel for it.
struct RegisterDevice {
  Napi::Env env;
  Napi::Object exports;
  template <template <class> class Op>
  std::optional<std::string> operator()() {
    if constexpr (ops::host_only_v<Op<float>>) {
      static_assert(!has_cuda<Op<float>>::value, "a host-only op (native/ops/schema.h) has no CUDA kernel");
      return std::nullopt;
    } else if constexpr (!has_cuda<Op<float>>::value) {
      return std::nullopt;
    } else {
      register_device_op(env, exports, Op<float>::name, parse_device<Op>);
      return std::string(", \"bf16\": ") + (has_cuda<Op<ops::bf16>>::value ? "true" : "false");
    }
  }
};

}  // namespace

NF_REGISTER_OPS(cuda_schema_ops) { register_op_table(env, exports, RegisterDevice{env, exports}); }

}  // namespace nf::napi
