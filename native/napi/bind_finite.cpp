// Binding for the finite scan: firstNonFinite { n, x, index }. A Float32Array x runs the
// ISA-dispatched kernel; a Float64Array x runs the reference twin. index is a Float64Array of
// length 1 (whatever x is: a position can pass 2^31) that receives the first position of a NaN
// or ±Inf in x, or -1 when every value is finite.
#include <type_traits>

#include "../cpu/finite.h"
#include "../cpu/ref/finite.h"
#include "args.h"
#include "registry.h"

namespace nf::napi {
namespace {

template <class T>
Job first_nonfinite(Args& a) {
  const int64_t n = a.dim("n", 0);
  const T* x = a.floats<T>("x", n);
  double* index = a.floats<double>("index", 1);
  return [=]() -> Status {
    int64_t first = -1;
    if constexpr (std::is_same_v<T, double>) {
      first = ref::first_nonfinite(x, n);
    } else {
      NF_TRY(cpu::first_nonfinite(&first, x, n));
    }
    *index = static_cast<double>(first);
    return Status::Ok();
  };
}

Job parse_first_nonfinite(Args& a) { return a.is_f64("x") ? first_nonfinite<double>(a) : first_nonfinite<float>(a); }

}  // namespace

NF_REGISTER_OPS(finite) { register_op(env, exports, "firstNonFinite", parse_first_nonfinite); }

}  // namespace nf::napi
