// Core binding: thread count and spin, and tensor memory (an ordinary ArrayBuffer: see
// native/napi/allocations.h): the aligned offset of a buffer, release, which frees one now, and the
// malloc policy applied at load (native/core/malloc_policy.h). ISA selection is in bind_isa.cpp.
#include <napi.h>

#include <cstdint>
#include <string>

#include "../../core/malloc_policy.h"
#include "../elementwise.h"
#include "../../core/threadpool.h"
#include "../../napi/allocations.h"
#include "../../napi/args.h"
#include "../../napi/registry.h"

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

Napi::Value ThreadSpin(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), thread_spin_us()); }

// setThreadSpin(us): how long idle pool threads spin before they sleep (core/threadpool.h).
Napi::Value SetThreadSpin(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const double us = info.Length() >= 1 && info[0].IsNumber() ? info[0].As<Napi::Number>().DoubleValue() : -1;
  if (!(us >= 0 && us <= kMaxSpinUs) || us != static_cast<int>(us))
    throw_error(env, "ERR_NF_INVALID_ARG",
                "setThreadSpin: expected an integer in [0, " + std::to_string(kMaxSpinUs) + "] for microseconds (0 = sleep at once)");
  set_thread_spin_us(static_cast<int>(us));
  return env.Undefined();
}

// alignedOffset(arrayBuffer): bytes from the buffer's start to its first 64-byte aligned address,
// where a tensor's view begins (lib/core/tensor.ts allocates 64 bytes more than it needs).
Napi::Value AlignedOffset(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsArrayBuffer())
    throw_error(env, "ERR_NF_INVALID_ARG", "alignedOffset: expected an ArrayBuffer for buffer");
  return Napi::Number::New(env, static_cast<double>(aligned_offset(info[0].As<Napi::ArrayBuffer>())));
}

// release(arrayBuffer): detaches the buffer, which frees its memory now rather than at a later GC
// (or, while an async op uses it, when that op settles); every view of it then has length 0.
// Releasing twice is a no-op.
Napi::Value Release(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsArrayBuffer())
    throw_error(env, "ERR_NF_INVALID_ARG", "release: expected an ArrayBuffer for buffer");
  release_buffer(info[0].As<Napi::ArrayBuffer>());
  return env.Undefined();
}

// castBf16(src, dst): dst = src converted between float32 and bfloat16 storage (a Float32Array into a
// Uint16Array of bf16 bits, or back; the same length), on the thread pool (cpu::convert_bf16_storage).
Napi::Value CastBf16(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const auto kind = [&](size_t i) {
    return info.Length() > i && info[i].IsTypedArray() ? info[i].As<Napi::TypedArray>().TypedArrayType() : napi_int8_array;
  };
  const bool to_bf16 = kind(0) == napi_float32_array && kind(1) == napi_uint16_array;
  if (!to_bf16 && !(kind(0) == napi_uint16_array && kind(1) == napi_float32_array))
    throw_error(env, "ERR_NF_INVALID_ARG", "castBf16: expected (Float32Array, Uint16Array) or (Uint16Array, Float32Array)");
  const Napi::TypedArray src = info[0].As<Napi::TypedArray>(), dst = info[1].As<Napi::TypedArray>();
  if (src.ElementLength() != dst.ElementLength())
    throw_error(env, "ERR_NF_INVALID_ARG", "castBf16: expected src and dst of the same length");
  const auto data = [](const Napi::TypedArray& t) { return static_cast<uint8_t*>(t.ArrayBuffer().Data()) + t.ByteOffset(); };
  cpu::convert_bf16_storage(data(dst), data(src), static_cast<int64_t>(src.ElementLength()), to_bf16);
  return env.Undefined();
}

// mallocPolicy(): whether the addon tuned malloc for tensor memory, and to what (core/malloc_policy.h).
Napi::Value MallocPolicyInfo(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const MallocPolicy p = apply_malloc_policy();
  Napi::Object o = Napi::Object::New(env);
  o.Set("applied", p.applied);
  o.Set("mmapThreshold", static_cast<double>(p.mmap_threshold));
  o.Set("trimThreshold", static_cast<double>(p.trim_threshold));
  return o;
}

}  // namespace

NF_REGISTER_OPS(core) {
  apply_malloc_policy();
  exports.Set("numThreads", Napi::Function::New(env, NumThreads, "numThreads"));
  exports.Set("setNumThreads", Napi::Function::New(env, SetNumThreads, "setNumThreads"));
  exports.Set("threadSpin", Napi::Function::New(env, ThreadSpin, "threadSpin"));
  exports.Set("setThreadSpin", Napi::Function::New(env, SetThreadSpin, "setThreadSpin"));
  exports.Set("alignedOffset", Napi::Function::New(env, AlignedOffset, "alignedOffset"));
  exports.Set("release", Napi::Function::New(env, Release, "release"));
  exports.Set("castBf16", Napi::Function::New(env, CastBf16, "castBf16"));
  exports.Set("mallocPolicy", Napi::Function::New(env, MallocPolicyInfo, "mallocPolicy"));
}

}  // namespace nf::napi
