// Each binding file registers its ops with NF_REGISTER_OPS(family) { ... }; addon.cpp runs every
// registration at module load, so adding an op family means adding one file.
#pragma once
#include <napi.h>

#include <string>

namespace nf::napi {

using RegisterFn = void (*)(Napi::Env env, Napi::Object exports);

// Adds a registration; returns true so it can initialise a static.
bool add_registration(RegisterFn fn);
void run_registrations(Napi::Env env, Napi::Object exports);

// Exports op `name`, which runs sync(info) and returns undefined, and its twin `name`Async, which
// returns async(info)'s Promise; an argument error either throws (a Napi::Error) rejects the
// Promise instead of throwing. The CPU and CUDA addons' op registration (args.cpp, device_args.cpp).
template <class Sync, class Async>
void export_op_pair(Napi::Env env, Napi::Object exports, const std::string& name, Sync sync, Async async) {
  exports.Set(name, Napi::Function::New(
                        env,
                        [sync](const Napi::CallbackInfo& info) -> Napi::Value {
                          sync(info);
                          return info.Env().Undefined();
                        },
                        name));
  const std::string async_name = name + "Async";
  exports.Set(async_name, Napi::Function::New(
                              env,
                              [async](const Napi::CallbackInfo& info) -> Napi::Value {
                                try {
                                  return async(info);
                                } catch (const Napi::Error& e) {
                                  auto d = Napi::Promise::Deferred::New(info.Env());
                                  d.Reject(e.Value());
                                  return d.Promise();
                                }
                              },
                              async_name));
}

}  // namespace nf::napi

#define NF_REGISTER_OPS(family)                                                      \
  static void nf_register_##family(Napi::Env env, Napi::Object exports);             \
  static const bool nf_registered_##family = ::nf::napi::add_registration(nf_register_##family); \
  static void nf_register_##family(Napi::Env env, Napi::Object exports)
