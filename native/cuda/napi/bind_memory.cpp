// The CUDA addon's memory functions: device buffers (blocks of the caching allocator, device.h) and
// the explicit copies between them and host typed arrays, all on the backend's stream (copies to the
// host wait for it); the allocator's statistics, emptyCache and its cap; synchronize and its
// Promise twin; what the backend is (a GPU build or the SIMT emulator, and which GEMM backend) and
// its live device bytes.
#include <cstdint>
#include <string>

#include "../device.h"
#include "../gemm.h"
#include "../../napi/registry.h"
#include "device_args.h"

namespace nf::napi {
namespace {

DeviceBuffer* buffer_arg(const Napi::CallbackInfo& info, size_t i, const char* fn) {
  DeviceBuffer* b = i < info.Length() ? device_buffer(info[i]) : nullptr;
  if (!b || !b->ptr)
    throw_error(info.Env(), "ERR_NF_INVALID_ARG",
                std::string(fn) + ": expected a live device buffer for argument " + std::to_string(i + 1));
  return b;
}

// The bytes of a host typed array argument, which must match `bytes`.
void* host_arg(const Napi::CallbackInfo& info, size_t i, size_t bytes, const char* fn) {
  if (i >= info.Length() || !info[i].IsTypedArray())
    throw_error(info.Env(), "ERR_NF_INVALID_ARG", std::string(fn) + ": expected a typed array for argument " +
                                                      std::to_string(i + 1));
  Napi::TypedArray t = info[i].As<Napi::TypedArray>();
  if (t.ByteLength() != bytes)
    throw_error(info.Env(), "ERR_NF_INVALID_ARG",
                std::string(fn) + ": expected a typed array of " + std::to_string(bytes) + " bytes but received " +
                    std::to_string(t.ByteLength()));
  return static_cast<uint8_t*>(t.ArrayBuffer().Data()) + t.ByteOffset();
}

}  // namespace

NF_REGISTER_OPS(cuda_memory) {
  auto fn = [&](const char* name, Napi::Value (*f)(const Napi::CallbackInfo&)) {
    exports.Set(name, Napi::Function::New(env, f, name));
  };
  // alloc(bytes, init = 'zero'): a device buffer from the cache, filled with zeros, left as the
  // block was ('none': for outputs written whole) or with 0xFF bytes ('poison': NaN floats).
  fn("alloc", [](const Napi::CallbackInfo& info) -> Napi::Value {
    if (info.Length() < 1 || !info[0].IsNumber() || info[0].As<Napi::Number>().DoubleValue() < 0 ||
        info[0].As<Napi::Number>().DoubleValue() > double(int64_t(1) << 42))
      throw_error(info.Env(), "ERR_NF_INVALID_ARG", "alloc: expected a byte count");
    BufferInit init = BufferInit::zero;
    if (info.Length() > 1 && !info[1].IsUndefined()) {
      const std::string how = info[1].IsString() ? info[1].As<Napi::String>().Utf8Value() : "";
      if (how == "none") init = BufferInit::none;
      else if (how == "poison") init = BufferInit::poison;
      else if (how != "zero") throw_error(info.Env(), "ERR_NF_INVALID_ARG", "alloc: expected 'zero', 'none' or 'poison' for init");
    }
    return new_device_buffer(info.Env(), size_t(info[0].As<Napi::Number>().Int64Value()), init);
  });
  // free(buffer): returns the memory to the cache now; later frees are no-ops.
  fn("free", [](const Napi::CallbackInfo& info) -> Napi::Value {
    DeviceBuffer* b = info.Length() > 0 ? device_buffer(info[0]) : nullptr;
    if (!b) throw_error(info.Env(), "ERR_NF_INVALID_ARG", "free: expected a device buffer");
    check_device(info.Env(), free_device_buffer(b));
    return info.Env().Undefined();
  });
  // upload(dst, src): host typed array -> device buffer of the same byte length.
  fn("upload", [](const Napi::CallbackInfo& info) -> Napi::Value {
    DeviceBuffer* dst = buffer_arg(info, 0, "upload");
    const void* src = host_arg(info, 1, dst->bytes, "upload");
    check_device(info.Env(), cuda::copy_to_device(dst->ptr, src, dst->bytes));
    return info.Env().Undefined();
  });
  // download(dst, src): device buffer -> host typed array of the same byte length (waits for it).
  fn("download", [](const Napi::CallbackInfo& info) -> Napi::Value {
    DeviceBuffer* src = buffer_arg(info, 1, "download");
    void* dst = host_arg(info, 0, src->bytes, "download");
    check_device(info.Env(), cuda::copy_to_host(dst, src->ptr, src->bytes));
    return info.Env().Undefined();
  });
  // copy(dst, src): device -> device, equal sizes.
  fn("copy", [](const Napi::CallbackInfo& info) -> Napi::Value {
    DeviceBuffer* dst = buffer_arg(info, 0, "copy");
    DeviceBuffer* src = buffer_arg(info, 1, "copy");
    if (dst->bytes != src->bytes) throw_error(info.Env(), "ERR_NF_INVALID_ARG", "copy: buffer sizes differ");
    check_device(info.Env(), cuda::copy_on_device(dst->ptr, src->ptr, src->bytes));
    return info.Env().Undefined();
  });
  // fillZero(buffer).
  fn("fillZero", [](const Napi::CallbackInfo& info) -> Napi::Value {
    DeviceBuffer* b = buffer_arg(info, 0, "fillZero");
    check_device(info.Env(), cuda::fill_zero(b->ptr, b->bytes));
    return info.Env().Undefined();
  });
  // synchronize(): waits for the backend's stream.
  fn("synchronize", [](const Napi::CallbackInfo& info) -> Napi::Value {
    check_device(info.Env(), cuda::synchronize());
    return info.Env().Undefined();
  });
  // synchronizeAsync(): a Promise settled once everything queued so far has finished (no blocking).
  fn("synchronizeAsync", [](const Napi::CallbackInfo& info) -> Napi::Value {
    return settle_when_done(info.Env(), [] { return Status::Ok(); }, {});
  });
  fn("deviceAllocatedBytes", [](const Napi::CallbackInfo& info) -> Napi::Value {
    return Napi::Number::New(info.Env(), double(device_allocated_bytes()));
  });
  // memoryStats(): the caching allocator's counters (device.h MemoryStats), bytes as numbers.
  fn("memoryStats", [](const Napi::CallbackInfo& info) -> Napi::Value {
    const cuda::MemoryStats s = cuda::memory_stats();
    Napi::Object o = Napi::Object::New(info.Env());
    o.Set("liveBytes", double(s.live_bytes));
    o.Set("peakLiveBytes", double(s.peak_live_bytes));
    o.Set("cachedBytes", double(s.cached_bytes));
    o.Set("limitBytes", double(s.limit_bytes));
    o.Set("fresh", double(s.fresh));
    o.Set("reused", double(s.reused));
    o.Set("released", double(s.released));
    o.Set("requestedBytes", double(device_allocated_bytes()));
    o.Set("graphBytes", double(s.graph_bytes));
    return o;
  });
  // emptyCache(): returns every idle block to the device.
  fn("emptyCache", [](const Napi::CallbackInfo& info) -> Napi::Value {
    check_device(info.Env(), cuda::empty_cache());
    return info.Env().Undefined();
  });
  // setCacheLimit(bytes): the cap on idle bytes (0 disables caching); trims the cache to it now.
  fn("setCacheLimit", [](const Napi::CallbackInfo& info) -> Napi::Value {
    if (info.Length() < 1 || !info[0].IsNumber() || !(info[0].As<Napi::Number>().DoubleValue() >= 0))
      throw_error(info.Env(), "ERR_NF_INVALID_ARG", "setCacheLimit: expected a non-negative byte count");
    const double v = info[0].As<Napi::Number>().DoubleValue();
    check_device(info.Env(), cuda::set_cache_limit(v >= 9.2e18 ? INT64_MAX : int64_t(v)));
    return info.Env().Undefined();
  });
  // backendInfo(): {emulated, devices, gemm, graphs} (devices: an error on a machine without a usable
  // GPU; gemm: which backend runs the matrix products, gemm.h GemmBackendInfo, asking loads cuBLASLt;
  // graphs: CUDA graphs captured, failed captures, launches and live graphs, device.h GraphStats).
  fn("backendInfo", [](const Napi::CallbackInfo& info) -> Napi::Value {
    int devices = 0;
    check_device(info.Env(), cuda::device_count(&devices));
    Napi::Env env = info.Env();
    Napi::Object o = Napi::Object::New(env);
#if defined(NF_CUDA_EMULATED)
    o.Set("emulated", true);
#else
    o.Set("emulated", false);
#endif
    o.Set("devices", devices);
    const cuda::GemmBackendInfo g = cuda::gemm_backend_info();
    const cuda::lt::Info& lt = g.cublaslt;
    Napi::Object gemm = Napi::Object::New(env);
    gemm.Set("backend", lt.loaded ? "cublaslt" : "kernel");
    gemm.Set("standIn", lt.stand_in);
    gemm.Set("library", lt.library.empty() ? env.Null() : Napi::String::New(env, lt.library));
    gemm.Set("reason", lt.reason.empty() ? env.Null() : Napi::String::New(env, lt.reason));
    gemm.Set("version", double(lt.version));
    gemm.Set("workspaceBytes", double(lt.workspace_bytes));
    Napi::Object calls = Napi::Object::New(env);
    calls.Set("cublaslt", double(lt.matmuls));
    calls.Set("fused", double(lt.fused));
    calls.Set("tf32", double(lt.tf32));
    calls.Set("bf16", double(lt.bf16));
    calls.Set("kernel", double(g.kernel));
    calls.Set("unsupported", double(lt.unsupported));
    calls.Set("heuristicQueries", double(lt.heuristic_queries));
    gemm.Set("calls", calls);
    o.Set("gemm", gemm);
    const cuda::GraphStats gs = cuda::graph_stats();
    Napi::Object graphs = Napi::Object::New(env);
    graphs.Set("captures", double(gs.captures));
    graphs.Set("failed", double(gs.failed));
    graphs.Set("launches", double(gs.launches));
    graphs.Set("live", double(gs.live));
    o.Set("graphs", graphs);
    return o;
  });
}

}  // namespace nf::napi
