#include "device_args.h"

#include <atomic>
#include <string>

#include "../device.h"

namespace nf::napi {
namespace {

// Marks the Externals this addon made, so no other External passes for a device buffer.
constexpr napi_type_tag kDeviceBufferTag = {0x6e66637564616275ull, 0x6666657232303234ull};

std::atomic<int64_t>& live_bytes() {
  static std::atomic<int64_t> n{0};
  return n;
}

std::string describe_value(const Napi::Value& v) {
  if (v.IsUndefined()) return "undefined";
  if (v.IsNull()) return "null";
  if (v.IsTypedArray()) {
    Napi::TypedArray t = v.As<Napi::TypedArray>();
    return "a host typed array of length " + std::to_string(t.ElementLength()) +
           " (a cpu tensor? move it with .to('cuda'))";
  }
  if (const DeviceBuffer* b = device_buffer(v))
    return b->ptr ? "a device buffer of " + std::to_string(b->bytes) + " bytes" : "a freed device buffer";
  if (v.IsNumber()) return "a number";
  if (v.IsString()) return "a string";
  return "an object";
}

}  // namespace

Napi::Value new_device_buffer(Napi::Env env, size_t bytes) {
  void* ptr = nullptr;
  check_device(env, cuda::device_alloc(&ptr, bytes ? bytes : 1));
  Status zero = cuda::fill_zero(ptr, bytes);
  if (!zero.ok()) {
    (void)cuda::device_free(ptr);
    check_device(env, zero);
  }
  auto* b = new DeviceBuffer{ptr, bytes};
  live_bytes() += int64_t(bytes);
  Napi::External<DeviceBuffer> ext = Napi::External<DeviceBuffer>::New(env, b, [](Napi::Env, DeviceBuffer* d) {
    (void)free_device_buffer(d);
    delete d;
  });
  napi_status st = napi_type_tag_object(env, ext, &kDeviceBufferTag);
  if (st != napi_ok) throw_error(env, "ERR_NF_CUDA", "cannot tag a device buffer handle");
  return ext;
}

DeviceBuffer* device_buffer(const Napi::Value& v) {
  if (!v.IsExternal()) return nullptr;
  bool tagged = false;
  if (napi_check_object_type_tag(v.Env(), v, &kDeviceBufferTag, &tagged) != napi_ok || !tagged) return nullptr;
  return v.As<Napi::External<DeviceBuffer>>().Data();
}

int64_t device_allocated_bytes() { return live_bytes().load(); }

Status free_device_buffer(DeviceBuffer* b) {
  if (!b->ptr) return Status::Ok();
  void* p = b->ptr;
  b->ptr = nullptr;
  live_bytes() -= int64_t(b->bytes);
  return cuda::device_free(p);
}

DeviceArgs::DeviceArgs(const Napi::CallbackInfo& info, const char* op) : Args(info, op), obj_(info[0].As<Napi::Object>()) {}

void* DeviceArgs::typed(const char* name, int64_t len, size_t elem, const char* type, bool optional) {
  Napi::Value v = obj_.Get(name);
  if (optional && (v.IsUndefined() || v.IsNull())) return nullptr;
  const DeviceBuffer* b = device_buffer(v);
  if (!b || !b->ptr || b->bytes != size_t(len) * elem)
    fail(std::string("expected a cuda ") + type + " buffer of " + std::to_string(len) + " elements for " + name +
         " but received " + describe_value(v));
  return b->ptr;
}

void check_device(Napi::Env env, const Status& s) {
  if (s.ok()) return;
  const bool cuda_call = s.message.rfind("cudaError", 0) == 0;
  throw_error(env, cuda_call ? "ERR_NF_CUDA" : "ERR_NF_KERNEL", s.op + ": " + s.message);
}

void register_device_op(Napi::Env env, Napi::Object exports, const char* name, DeviceParser parse) {
  std::string op(name);
  auto run = [op, parse](const Napi::CallbackInfo& info) {
    DeviceArgs args(info, op.c_str());
    check_device(info.Env(), parse(args)());
  };
  exports.Set(name, Napi::Function::New(
                        env,
                        [run](const Napi::CallbackInfo& info) -> Napi::Value {
                          run(info);
                          return info.Env().Undefined();
                        },
                        name));
  const std::string async_name = op + "Async";
  exports.Set(async_name, Napi::Function::New(
                              env,
                              [run](const Napi::CallbackInfo& info) -> Napi::Value {
                                auto d = Napi::Promise::Deferred::New(info.Env());
                                try {
                                  run(info);
                                  d.Resolve(info.Env().Undefined());
                                } catch (const Napi::Error& e) {
                                  d.Reject(e.Value());
                                }
                                return d.Promise();
                              },
                              async_name));
}

}  // namespace nf::napi
