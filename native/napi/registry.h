// Each binding file registers its ops with NF_REGISTER_OPS(family) { ... }; addon.cpp runs every
// registration at module load, so adding an op family means adding one file.
#pragma once
#include <napi.h>

namespace nf::napi {

using RegisterFn = void (*)(Napi::Env env, Napi::Object exports);

// Adds a registration; returns true so it can initialise a static.
bool add_registration(RegisterFn fn);
void run_registrations(Napi::Env env, Napi::Object exports);

}  // namespace nf::napi

#define NF_REGISTER_OPS(family)                                                      \
  static void nf_register_##family(Napi::Env env, Napi::Object exports);             \
  static const bool nf_registered_##family = ::nf::napi::add_registration(nf_register_##family); \
  static void nf_register_##family(Napi::Env env, Napi::Object exports)
