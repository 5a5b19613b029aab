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
#include <vector>

#include "../../napi/args.h"
#include "../../ops/schema.h"

namespace nf::napi {

// Device memory owned by a JS handle (a type-tagged External): a block of the caching allocator
// (device.h), returned to the cache by free() or, failing that, when the handle is garbage-collected.
// A buffer made for a bfloat16 tensor says so (`bf16`): the ops read it only where they take bf16
// (precision 'bf16'), and a float32 field never takes it (nor a bf16 field a float32 buffer).
struct DeviceBuffer {
  void* ptr = nullptr;  // null once freed
  size_t bytes = 0;
  bool bf16 = false;
};

// What a new buffer holds: zeros (for what accumulates: parameter gradients, Tensor.zeros), whatever
// the block held before (an op's output, written whole), or 0xFF bytes (NaN in every float32: the
// NF_POISON_UNINITIALIZED check that no op reads what it never wrote).
enum class BufferInit { zero, none, poison };

// A new handle owning `bytes` of device memory from the cache (for a bfloat16 tensor when `bf16`).
Napi::Value new_device_buffer(Napi::Env env, size_t bytes, BufferInit init = BufferInit::zero, bool bf16 = false);
// The buffer behind `v`, or null when v is not a device buffer handle.
DeviceBuffer* device_buffer(const Napi::Value& v);
// Bytes requested by live handles (in every context; the cache's block capacities are in
// cuda::memory_stats()).
int64_t device_allocated_bytes();
// Returns a handle's memory to the cache now (later frees and the GC's are no-ops).
Status free_device_buffer(DeviceBuffer* b);

class DeviceArgs : public Args {
 public:
  DeviceArgs(const Napi::CallbackInfo& info, const char* op);

  // The device memory of buffer `name`, which must hold exactly `len` elements of T. The *_opt forms
  // return nullptr for null/undefined.
  template <class T>
  T* buf(const char* name, int64_t len) {
    return static_cast<T*>(typed(name, len, sizeof(T), type_name<T>(), false, std::is_same_v<T, ops::bf16>));
  }
  template <class T>
  T* buf_opt(const char* name, int64_t len) {
    return static_cast<T*>(typed(name, len, sizeof(T), type_name<T>(), true, std::is_same_v<T, ops::bf16>));
  }
  // Whether any field of the options holds a bfloat16 device buffer (the call then runs the op's
  // bf16 kernel: native/cuda/napi/bind_ops.cpp).
  bool any_bf16() const;
  // The buffer handles this call read: an asynchronous call keeps them alive until it settles.
  const std::vector<Napi::Value>& handles() const { return handles_; }

  // The element count of buffer `name` if it is one of T, else -1.
  template <class T>
  int64_t buf_length(const char* name) const {
    const DeviceBuffer* b = device_buffer(field(name));
    return b && b->bf16 == std::is_same_v<T, ops::bf16> && b->bytes % sizeof(T) == 0 ? int64_t(b->bytes / sizeof(T))
                                                                                     : -1;
  }

 private:
  template <class T>
  static const char* type_name() {
    if constexpr (std::is_same_v<T, double>) return "float64";
    else if constexpr (std::is_same_v<T, ops::bf16>) return "bfloat16";
    else return sizeof(T) == 4 ? (std::is_same_v<T, float> ? "float32" : "int32") : "bool";
  }
  void* typed(const char* name, int64_t len, size_t elem, const char* type, bool optional, bool bf16);

  Napi::Object obj_;
  std::vector<Napi::Value> handles_;
};

// Registers `name` and `nameAsync` on exports. Both validate their arguments on the calling thread.
// `name` then runs the op's job in stream order (cuda::stream_run: on a GPU the kernels are queued
// and it returns; the emulator runs them on its stream thread and waits). `nameAsync` submits the
// job (cuda::stream_run_async) and returns a Promise that settles when the stream has finished it,
// without blocking the event loop: on a GPU a host callback on the stream, in the emulator the
// stream thread, settle it through a thread-safe function (settle_when_done). Invalid arguments
// reject the Promise. A Status with its own code keeps it (ERR_NF_CUDA_OOM: out of device memory
// even after the caching allocator released its idle blocks); otherwise a failing CUDA call (a
// Status whose message starts with "cudaError...", with file:line) throws or rejects with code
// ERR_NF_CUDA, any other kernel failure ERR_NF_KERNEL.
using DeviceParser = Job (*)(DeviceArgs&);
void register_device_op(Napi::Env env, Napi::Object exports, const char* name, DeviceParser parse);
// Submits `job` to the stream and returns a Promise settled (on this env's thread) when it and all
// work before it has finished; `keep` stays referenced until then.
Napi::Promise settle_when_done(Napi::Env env, Job job, const std::vector<Napi::Value>& keep);
// The JS Error for a failed Status (as register_device_op's ops throw it), and throwing it.
Napi::Error device_error(Napi::Env env, const Status& s);
void check_device(Napi::Env env, const Status& s);

}  // namespace nf::napi
