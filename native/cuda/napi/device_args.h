// The CUDA addon's view of JS values: device buffers (opaque handles to device memory that JS can
// hold but never read) and the options objects of its ops, read like the CPU addon's (native/napi/
// args.h: dims, numbers and flags by name) but with device buffers where the CPU ops take typed
// arrays. A host array, a freed buffer or a buffer of the wrong size is a JS Error naming the op and
// the argument, never a crash.
#pragma once
#include <napi.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "../../napi/args.h"

namespace nf::napi {

// Device memory owned by a JS handle (a type-tagged External): freed by free() or, failing that,
// when the handle is garbage-collected.
struct DeviceBuffer {
  void* ptr = nullptr;  // null once freed
  size_t bytes = 0;
};

// A new handle owning `bytes` of zero-filled device memory.
Napi::Value new_device_buffer(Napi::Env env, size_t bytes);
// The buffer behind `v`, or null when v is not a device buffer handle.
DeviceBuffer* device_buffer(const Napi::Value& v);
// Bytes of device memory held by live handles (in every context).
int64_t device_allocated_bytes();
// Frees a handle's memory now (later frees and the GC's are no-ops).
Status free_device_buffer(DeviceBuffer* b);

class DeviceArgs : public Args {
 public:
  DeviceArgs(const Napi::CallbackInfo& info, const char* op);

  // The device memory of buffer `name`, which must hold exactly `len` elements of T. The *_opt forms
  // return nullptr for null/undefined.
  template <class T>
  T* buf(const char* name, int64_t len) {
    return static_cast<T*>(typed(name, len, sizeof(T), type_name<T>(), false));
  }
  template <class T>
  T* buf_opt(const char* name, int64_t len) {
    return static_cast<T*>(typed(name, len, sizeof(T), type_name<T>(), true));
  }
  // The element count of buffer `name` if it is one of T, else -1.
  template <class T>
  int64_t buf_length(const char* name) const {
    const DeviceBuffer* b = device_buffer(obj_.Get(name));
    return b && b->bytes % sizeof(T) == 0 ? int64_t(b->bytes / sizeof(T)) : -1;
  }

 private:
  template <class T>
  static const char* type_name() {
    return sizeof(T) == 4 ? (std::is_same_v<T, float> ? "float32" : "int32") : "bool";
  }
  void* typed(const char* name, int64_t len, size_t elem, const char* type, bool optional);

  Napi::Object obj_;
};

// Registers `name` and `nameAsync` on exports. The op validates its arguments and queues its kernels
// on the backend's stream before returning (on a GPU that is asynchronous already; the emulator runs
// them there and then), so `nameAsync` does the same and returns a settled Promise. A failing CUDA
// call (a Status whose message starts with "cudaError...", with file:line) throws code ERR_NF_CUDA,
// any other kernel failure ERR_NF_KERNEL.
using DeviceParser = Job (*)(DeviceArgs&);
void register_device_op(Napi::Env env, Napi::Object exports, const char* name, DeviceParser parse);
// Throws the JS Error for a failed Status (as register_device_op's ops do).
void check_device(Napi::Env env, const Status& s);

}  // namespace nf::napi
