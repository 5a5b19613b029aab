// Core binding: thread count, and 64-byte aligned native allocations handed to JS
// as ArrayBuffers (the GC is told about their size and frees them through a finalizer), served by
// the block cache, whose counters and cap are exposed too.
#include <napi.h>

#include <cstdint>

#include "../core/block_cache.h"
#include "../core/threadpool.h"
#include "allocations.h"
#include "args.h"
#include "registry.h"

namespace nf::napi {
namespace {

Napi::Value NumThreads(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), num_threads()); }

Napi::Value SetNumThreads(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsNumber())
    throw_error(env, "ERR_NF_INVALID_ARG", "setNumThreads: expected an integer for n");
  double n = info[0].As<Napi::Number>().DoubleValue();
  if (!(n >= 0 && n <= 256) || n != static_cast<int>(n))
    throw_error(env, "ERR_NF_INVALID_ARG", "setNumThreads: expected an integer in [0, 256] for n (0 = all cores)");
  set_num_threads(static_cast<int>(n));
  return env.Undefined();
}

// allocate(byteLength, uninitialized = false): a 64-byte aligned ArrayBuffer owned by native
// memory, zero-filled unless `uninitialized` is true.
Napi::Value Allocate(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  double n = info.Length() >= 1 && info[0].IsNumber() ? info[0].As<Napi::Number>().DoubleValue() : -1;
  if (!(n >= 0 && n <= 1e13) || n != static_cast<double>(static_cast<int64_t>(n)))
    throw_error(env, "ERR_NF_INVALID_ARG", "allocate: expected a non-negative integer for byteLength");
  if (info.Length() >= 2 && !info[1].IsUndefined() && !info[1].IsBoolean())
    throw_error(env, "ERR_NF_INVALID_ARG", "allocate: expected a boolean for uninitialized");
  const bool uninitialized = info.Length() >= 2 && info[1].IsBoolean() && info[1].As<Napi::Boolean>().Value();
  return allocate_buffer(env, static_cast<size_t>(n), uninitialized ? Fill::uninitialized : Fill::zero);
}

// release(arrayBuffer): frees a buffer made by allocate now rather than at the next GC (or, while
// an async op uses it, when that op settles), and detaches it so every view of it has length 0.
// Releasing twice, or a plain JS buffer, only detaches.
Napi::Value Release(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsArrayBuffer())
    throw_error(env, "ERR_NF_INVALID_ARG", "release: expected an ArrayBuffer for buffer");
  release_buffer(env, info[0].As<Napi::ArrayBuffer>());
  return env.Undefined();
}

// allocatorStats(): the block cache's counters (core/block_cache.h).
Napi::Value AllocatorStats(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  BlockCacheStats s = block_cache_stats();
  Napi::Object o = Napi::Object::New(env);
  o.Set("liveBytes", static_cast<double>(s.live_bytes));
  o.Set("cachedBytes", static_cast<double>(s.cached_bytes));
  o.Set("fresh", static_cast<double>(s.fresh));
  o.Set("reused", static_cast<double>(s.reused));
  o.Set("cacheLimit", static_cast<double>(s.limit_bytes));
  return o;
}

Napi::Value EmptyCache(const Napi::CallbackInfo& info) {
  block_cache_empty();
  return info.Env().Undefined();
}

Napi::Value SetCacheLimit(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  double n = info.Length() >= 1 && info[0].IsNumber() ? info[0].As<Napi::Number>().DoubleValue() : -1;
  if (!(n >= 0 && n <= 9e15) || n != static_cast<double>(static_cast<int64_t>(n)))
    throw_error(env, "ERR_NF_INVALID_ARG", "setCacheLimit: expected a non-negative integer for bytes");
  block_cache_set_limit(static_cast<int64_t>(n));
  return env.Undefined();
}

}  // namespace

NF_REGISTER_OPS(core) {
  exports.Set("numThreads", Napi::Function::New(env, NumThreads, "numThreads"));
  exports.Set("setNumThreads", Napi::Function::New(env, SetNumThreads, "setNumThreads"));
  exports.Set("allocate", Napi::Function::New(env, Allocate, "allocate"));
  exports.Set("release", Napi::Function::New(env, Release, "release"));
  exports.Set("allocatedBytes", Napi::Function::New(
                                    env, [](const Napi::CallbackInfo& info) -> Napi::Value {
                                      return Napi::Number::New(info.Env(), static_cast<double>(allocated_bytes()));
                                    },
                                    "allocatedBytes"));
  exports.Set("allocatorStats", Napi::Function::New(env, AllocatorStats, "allocatorStats"));
  exports.Set("emptyCache", Napi::Function::New(env, EmptyCache, "emptyCache"));
  exports.Set("setCacheLimit", Napi::Function::New(env, SetCacheLimit, "setCacheLimit"));
}

}  // namespace nf::napi
