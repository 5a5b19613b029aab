// ISA binding: which CPU kernel variant runs (isaInfo, activeIsa, setIsa) and the load-time self-check's
// verdict (native/core/cpu_features.h). Registering it settles the active variant, which runs the
// self-check, so the check happens while the addon loads rather than inside the first op.
#include <napi.h>

#include <atomic>
#include <vector>

#include "../../core/cpu_features.h"
#include "../gemm.h"
#include "../../napi/args.h"
#include "../../napi/registry.h"

namespace nf::napi {
namespace {

Napi::Array isa_names(Napi::Env env, bool (*keep)(Isa)) {
  Napi::Array a = Napi::Array::New(env);
  for (Isa isa : kCompiledIsas)
    if (keep(isa)) a.Set(a.Length(), isa_name(isa));
  return a;
}

// [{ isa, <field>: value }] for each entry of a self-check list.
template <class Entry, class Value>
Napi::Array isa_entries(Napi::Env env, const std::vector<Entry>& entries, const char* field, Value Entry::*value) {
  Napi::Array a = Napi::Array::New(env);
  for (const Entry& e : entries) {
    Napi::Object o = Napi::Object::New(env);
    o.Set("isa", isa_name(e.isa));
    o.Set(field, e.*value);
    a.Set(a.Length(), o);
  }
  return a;
}

Napi::Value IsaInfo(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const IsaSelfCheck& check = isa_selfcheck();
  Napi::Object o = Napi::Object::New(env);
  o.Set("active", isa_name(active_isa()));
  o.Set("detected", isa_name(detected_isa()));
  o.Set("bf16DotRatio", bf16_dot_ratio());
  o.Set("int8Kernels", cpu::int8_kernels_name(cpu::int8_kernels(active_isa())));
  o.Set("bf16Kernels", cpu::bf16_gemm_kernels(active_isa()));
  o.Set("available", isa_names(env, isa_usable));
  o.Set("compiled", isa_names(env, [](Isa) { return true; }));
  o.Set("rejected", isa_entries(env, check.rejected, "reason", &IsaRejection::reason));
  Napi::Object self = Napi::Object::New(env);
  self.Set("ms", check.ms);
  self.Set("tolerance", check.tolerance);
  self.Set("checked", isa_entries(env, check.checked, "maxError", &IsaChecked::max_error));
  o.Set("selfCheck", self);
  return o;
}

// The active variant's name alone: what a caller checking it often (lib/core/prepack.ts) reads.
Napi::Value ActiveIsa(const Napi::CallbackInfo& info) { return Napi::String::New(info.Env(), isa_name(active_isa())); }

Napi::Value SetIsa(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Isa isa;
  if (info.Length() < 1 || !info[0].IsString() || !parse_isa(info[0].As<Napi::String>().Utf8Value(), &isa))
    throw_error(env, "ERR_NF_INVALID_ARG", "setIsa: expected 'scalar', 'avx2', 'avx512', 'avx512bf16' or 'neon' for isa");
  check(env, set_active_isa(isa));
  return env.Undefined();
}

// True once per process (whatever the number of contexts or worker threads loading the addon) when
// the self-check rejected a variant: the caller that gets it emits the one warning.
Napi::Value ClaimSelfCheckWarning(const Napi::CallbackInfo& info) {
  static std::atomic<bool> claimed{false};
  const bool due = !isa_selfcheck().rejected.empty() && !claimed.exchange(true);
  return Napi::Boolean::New(info.Env(), due);
}

}  // namespace

NF_REGISTER_OPS(isa) {
  (void)active_isa();  // settles the initial variant: runs the self-check now, at load
  exports.Set("isaInfo", Napi::Function::New(env, IsaInfo, "isaInfo"));
  exports.Set("activeIsa", Napi::Function::New(env, ActiveIsa, "activeIsa"));
  exports.Set("setIsa", Napi::Function::New(env, SetIsa, "setIsa"));
  exports.Set("claimSelfCheckWarning", Napi::Function::New(env, ClaimSelfCheckWarning, "claimSelfCheckWarning"));
}

}  // namespace nf::napi
