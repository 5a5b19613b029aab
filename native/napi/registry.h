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

// Exports op `name` and its twin `name`Async, for either addon: each call reads its arguments into
// an ArgsT (the addon's reader: host arrays or device buffers) and parses them into a job; `name`
// runs it with run_sync(env, job) and returns undefined, `name`Async returns run_async(env, job,
// args)'s Promise. An argument error (a Napi::Error) throws from `name` and rejects the Promise of
// `name`Async.
template <class ArgsT, class Parse, class RunSync, class RunAsync>
void export_op(Napi::Env env, Napi::Object exports, const char* name, Parse parse, RunSync run_sync, RunAsync run_async) {
  const std::string op(name);
  exports.Set(op, Napi::Function::New(
                      env,
                      [op, parse, run_sync](const Napi::CallbackInfo& info) -> Napi::Value {
                        ArgsT args(info, op.c_str());
                        run_sync(info.Env(), parse(args));
                        return info.Env().Undefined();
                      },
                      op));
  const std::string async_name = op + "Async";
  exports.Set(async_name, Napi::Function::New(
                              env,
                              [op, parse, run_async](const Napi::CallbackInfo& info) -> Napi::Value {
                                try {
                                  ArgsT args(info, op.c_str());
                                  return run_async(info.Env(), parse(args), args);
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
