// The addon's entry point: builds the exports object from every registered op family.
// Context-aware (NAPI_MODULE_INIT): loads in worker_threads and several contexts at once.
#include <napi.h>

#include <vector>

#include "registry.h"

namespace nf::napi {

static std::vector<RegisterFn>& registrations() {
  static std::vector<RegisterFn> fns;
  return fns;
}

bool add_registration(RegisterFn fn) {
  registrations().push_back(fn);
  return true;
}

void run_registrations(Napi::Env env, Napi::Object exports) {
  for (RegisterFn fn : registrations()) fn(env, exports);
}

}  // namespace nf::napi

static Napi::Object Init(Napi::Env env, Napi::Object exports) {
  nf::napi::run_registrations(env, exports);
  return exports;
}

NODE_API_MODULE(nodeformer, Init)
