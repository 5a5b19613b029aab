#include "device_args.h"

#include <atomic>
#include <mutex>
#include <string>
#include <unordered_map>

#include "../device.h"
#include "../../napi/registry.h"

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
  if (const DeviceBuffer* b = device_buffer(v)) {
    if (!b->ptr) return "a freed device buffer";
    if (b->bf16) return "a bfloat16 device buffer of " + std::to_string(b->bytes / 2) + " elements";
    return "a device buffer of " + std::to_string(b->bytes) + " bytes";
  }
  if (v.IsNumber()) return "a number";
  if (v.IsString()) return "a string";
  return "an object";
}

}  // namespace

Napi::Value new_device_buffer(Napi::Env env, size_t bytes, BufferInit init, bool bf16) {
  void* ptr = nullptr;
  check_device(env, cuda::cached_alloc(&ptr, bytes));
  if (init != BufferInit::none) {
    Status fill = cuda::fill_bytes(ptr, init == BufferInit::zero ? 0 : 0xff, bytes);
    if (!fill.ok()) {
      (void)cuda::cached_free(ptr, bytes);
      check_device(env, fill);
    }
  }
  auto* b = new DeviceBuffer{ptr, bytes, bf16};
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
  return cuda::cached_free(p, b->bytes);
}

DeviceArgs::DeviceArgs(const Napi::CallbackInfo& info, const char* op) : Args(info, op), obj_(info[0].As<Napi::Object>()) {}

void* DeviceArgs::typed(const char* name, int64_t len, size_t elem, const char* type, bool optional, bool bf16) {
  Napi::Value v = field(name);
  if (optional && (v.IsUndefined() || v.IsNull())) return nullptr;
  const DeviceBuffer* b = device_buffer(v);
  if (!b || !b->ptr || b->bytes != size_t(len) * elem || b->bf16 != bf16)
    fail(std::string("expected a cuda ") + type + " buffer of " + std::to_string(len) + " elements for " + name +
         " but received " + describe_value(v));
  handles_.push_back(v);
  return b->ptr;
}

bool DeviceArgs::any_bf16() const {
  const Napi::Array keys = obj_.GetPropertyNames();
  for (uint32_t i = 0; i < keys.Length(); ++i) {
    const Napi::Value v = obj_.Get(keys.Get(i));
    const DeviceBuffer* b = device_buffer(v);
    if (b && b->bf16) return true;
    if (v.IsArray()) {  // a tensor list (native/ops/schema.h)
      const Napi::Array list = v.As<Napi::Array>();
      for (uint32_t j = 0; j < list.Length(); ++j)
        if (const DeviceBuffer* e = device_buffer(list.Get(j)); e && e->bf16) return true;
    }
  }
  return false;
}

Napi::Error device_error(Napi::Env env, const Status& s) {
  const bool cuda_call = s.message.rfind("cudaError", 0) == 0;
  Napi::Error e = Napi::Error::New(env, s.op + ": " + s.message);
  e.Set("code", Napi::String::New(env, s.code ? s.code : cuda_call ? "ERR_NF_CUDA" : "ERR_NF_KERNEL"));
  return e;
}

void check_device(Napi::Env env, const Status& s) {
  if (!s.ok()) throw device_error(env, s);
}

namespace {

// Settling Promises from the stream: one thread-safe function per env (the addon may load in several
// worker_threads). It keeps the event loop alive only while Promises are pending.
struct Completion;
void settle(Napi::Env env, Napi::Function, void*, Completion* c);
using SettleFn = Napi::TypedThreadSafeFunction<void, Completion, settle>;

struct Settler {
  SettleFn tsfn;
  int64_t pending = 0;
  bool closed = false;
};

struct Completion {
  Settler* settler;
  Napi::Promise::Deferred deferred;
  std::vector<Napi::Reference<Napi::Value>> keep;
  Status status;
};

std::mutex& settlers_mutex() {
  static std::mutex m;
  return m;
}
std::unordered_map<napi_env, Settler*>& settlers() {
  static auto* m = new std::unordered_map<napi_env, Settler*>();
  return *m;
}

void settle(Napi::Env env, Napi::Function, void*, Completion* c) {
  if (env == nullptr) {  // the env is going away: nothing to settle, no reference to delete
    for (auto& r : c->keep) r.SuppressDestruct();
    delete c;
    return;
  }
  Settler* s = c->settler;
  if (--s->pending == 0 && !s->closed) s->tsfn.Unref(env);
  if (c->status.ok()) c->deferred.Resolve(env.Undefined());
  else c->deferred.Reject(device_error(env, c->status).Value());
  delete c;
}

Settler* settler_of(Napi::Env env) {
  std::lock_guard<std::mutex> lock(settlers_mutex());
  auto it = settlers().find(env);
  if (it != settlers().end()) return it->second;
  auto* s = new Settler();
  s->tsfn = SettleFn::New(env, "nodeformer:cuda-stream", 0, 1);
  s->tsfn.Unref(env);
  settlers()[env] = s;
  // At teardown: let the stream finish (its callbacks then find the function still open), then close.
  napi_add_env_cleanup_hook(
      env,
      [](void* arg) {
        auto* st = static_cast<Settler*>(arg);
        (void)cuda::synchronize();
        std::lock_guard<std::mutex> lock(settlers_mutex());
        for (auto it = settlers().begin(); it != settlers().end(); ++it)
          if (it->second == st) {
            settlers().erase(it);
            break;
          }
        st->closed = true;
        st->tsfn.Release();
      },
      s);
  return s;
}

}  // namespace

Napi::Promise settle_when_done(Napi::Env env, Job job, const std::vector<Napi::Value>& keep) {
  Settler* s = settler_of(env);
  auto* c = new Completion{s, Napi::Promise::Deferred::New(env), {}, Status::Ok()};
  for (const Napi::Value& v : keep) c->keep.push_back(Napi::Reference<Napi::Value>::New(v, 1));
  Napi::Promise promise = c->deferred.Promise();
  if (s->pending++ == 0) s->tsfn.Ref(env);
  const Status queued = cuda::stream_run_async(std::move(job), [c](const Status& st) {
    c->status = st;
    (void)c->settler->tsfn.NonBlockingCall(c);  // (fails only once the env is gone: c is then left)
  });
  if (!queued.ok()) {  // (a GPU job that failed while queueing: done is never called)
    if (--s->pending == 0) s->tsfn.Unref(env);
    c->deferred.Reject(device_error(env, queued).Value());
    delete c;
  }
  return promise;
}

void register_device_op(Napi::Env env, Napi::Object exports, const char* name, DeviceParser parse) {
  export_op<DeviceArgs>(
      env, exports, name, parse, [](Napi::Env e, Job job) { check_device(e, cuda::stream_run(std::move(job))); },
      [](Napi::Env e, Job job, DeviceArgs& args) { return settle_when_done(e, std::move(job), args.handles()); });
}

}  // namespace nf::napi
