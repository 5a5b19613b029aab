// Registering the op table (native/ops/ops.h) on an addon's exports: what both addons' bindings
// share. A binding gives a registrar, a functor whose `template <template <class> class Op>
// std::optional<std::string> operator()()` registers op Op and returns the extra JSON members of its
// schema entry ("" for none), or nullopt when it does not register Op; register_op_table runs it over the table and exports opSchema(), the
// JSON list of the registered ops (native/ops/recorder.h), which lib/core/device.ts reads for
// supports(op, device) and scripts/gen_native_types.js turns into the TypeScript interface.
#pragma once
#include <napi.h>

#include <optional>
#include <string>

#include "../ops/ops.h"
#include "../ops/recorder.h"

namespace nf::napi {

namespace detail {
// Appends the schema of each op the registrar registers.
template <class Registrar>
struct RegisterEach {
  Registrar& registrar;
  std::string& schema;
  template <template <class> class Op>
  void operator()() {
    const std::optional<std::string> extra = registrar.template operator()<Op>();
    if (extra) schema += (schema.size() > 1 ? ", " : "") + ops::record_op<Op>(*extra);
  }
};
}  // namespace detail

template <class Registrar>
void register_op_table(Napi::Env env, Napi::Object exports, Registrar registrar) {
  std::string schema = "[";
  ops::AllOps::each(detail::RegisterEach<Registrar>{registrar, schema});
  schema += "]";
  exports.Set("opSchema", Napi::Function::New(
                              env, [schema](const Napi::CallbackInfo& info) { return Napi::String::New(info.Env(), schema); },
                              "opSchema"));
}

}  // namespace nf::napi
