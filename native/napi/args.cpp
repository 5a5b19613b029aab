#include "args.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <type_traits>

#include "../ops/schema.h"
#include "allocations.h"
#include "registry.h"

namespace nf::napi {
namespace {

const char* typed_name(napi_typedarray_type t) {
  switch (t) {
    case napi_float32_array: return "Float32Array";
    case napi_float64_array: return "Float64Array";
    case napi_int32_array: return "Int32Array";
    case napi_uint8_array: return "Uint8Array";
    case napi_int8_array: return "Int8Array";
    case napi_uint8_clamped_array: return "Uint8ClampedArray";
    case napi_int16_array: return "Int16Array";
    case napi_uint16_array: return "Uint16Array";
    case napi_uint32_array: return "Uint32Array";
    case napi_bigint64_array: return "BigInt64Array";
    case napi_biguint64_array: return "BigUint64Array";
    default: return "TypedArray";
  }
}

std::string describe(const Napi::Value& v) {
  if (v.IsUndefined()) return "undefined";
  if (v.IsNull()) return "null";
  if (v.IsTypedArray()) {
    Napi::TypedArray t = v.As<Napi::TypedArray>();
    return std::string(typed_name(t.TypedArrayType())) + " of length " + std::to_string(t.ElementLength());
  }
  if (v.IsArray()) return "Array";
  if (v.IsNumber()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.10g", v.As<Napi::Number>().DoubleValue());
    return std::string("number ") + buf;
  }
  if (v.IsString()) return "string";
  if (v.IsBoolean()) return "boolean";
  if (v.IsFunction()) return "function";
  return "object";
}

}  // namespace

[[noreturn]] void throw_error(Napi::Env env, const char* code, const std::string& message) {
  Napi::Error e = Napi::Error::New(env, message);
  e.Set("code", Napi::String::New(env, code));
  throw e;
}

Args::Args(const Napi::CallbackInfo& info, const char* op) : env_(info.Env()), op_(op) {
  if (info.Length() < 1 || !info[0].IsObject() || info[0].IsArray())
    throw_error(env_, "ERR_NF_INVALID_ARG",
                std::string(op) + ": expected one options object but received " +
                    (info.Length() < 1 ? std::string("nothing") : describe(info[0])));
  obj_ = info[0].As<Napi::Object>();
}

void Args::fail(const std::string& message) const {
  throw_error(env_, "ERR_NF_INVALID_ARG", std::string(op_) + ": " + message);
}

Napi::Value Args::field(const char* name) const {
  const char* bracket = std::strchr(name, '[');
  if (!bracket) return obj_.Get(name);
  Napi::Value list = obj_.Get(std::string(name, bracket));
  if (!list.IsArray()) return env_.Undefined();
  return list.As<Napi::Array>().Get(uint32_t(std::strtoul(bracket + 1, nullptr, 10)));
}

int64_t Args::list_length(const char* name) const {
  Napi::Value v = field(name);
  return v.IsArray() ? int64_t(v.As<Napi::Array>().Length()) : -1;
}

std::string Args::describe_field(const char* name) const { return describe(field(name)); }

int64_t Args::dim(const char* name, int64_t min, int64_t max) {
  Napi::Value v = field(name);
  if (!v.IsNumber()) fail(std::string("expected an integer for ") + name + " but received " + describe(v));
  double d = v.As<Napi::Number>().DoubleValue();
  if (!std::isfinite(d) || d != std::floor(d) || d < double(min) || d > double(max))
    fail(std::string("expected an integer in [") + std::to_string(min) + ", " + std::to_string(max) + "] for " +
         name + " but received " + describe(v));
  return static_cast<int64_t>(d);
}

int64_t Args::integer(const char* name, int64_t def, int64_t min, int64_t max) {
  Napi::Value v = field(name);
  if (v.IsUndefined() || v.IsNull()) return def;
  return dim(name, min, max);
}

double Args::number(const char* name, double def, double min, double max) {
  Napi::Value v = field(name);
  if (v.IsUndefined() || v.IsNull()) return def;
  if (!v.IsNumber()) fail(std::string("expected a number for ") + name + " but received " + describe(v));
  double d = v.As<Napi::Number>().DoubleValue();
  if (!std::isfinite(d) || d < min || d > max)
    fail(std::string("expected a finite number in [") + std::to_string(min) + ", " + std::to_string(max) +
         "] for " + name + " but received " + describe(v));
  return d;
}

bool Args::flag(const char* name, bool def) {
  Napi::Value v = field(name);
  if (v.IsUndefined() || v.IsNull()) return def;
  if (!v.IsBoolean()) fail(std::string("expected a boolean for ") + name + " but received " + describe(v));
  return v.As<Napi::Boolean>().Value();
}

std::string Args::text(const char* name, const std::string& def) {
  Napi::Value v = field(name);
  if (v.IsUndefined() || v.IsNull()) return def;
  if (!v.IsString()) fail(std::string("expected a string for ") + name + " but received " + describe(v));
  return v.As<Napi::String>().Utf8Value();
}

bool Args::is_f64(const char* name) {
  Napi::Value v = field(name);
  if (v.IsArray() && v.As<Napi::Array>().Length() > 0) v = v.As<Napi::Array>().Get(uint32_t(0));  // a tensor list
  return v.IsTypedArray() && v.As<Napi::TypedArray>().TypedArrayType() == napi_float64_array;
}

bool Args::any_bf16() const {
  const auto bf16 = [](const Napi::Value& v) {
    return v.IsTypedArray() && v.As<Napi::TypedArray>().TypedArrayType() == napi_uint16_array;
  };
  const Napi::Array keys = obj_.GetPropertyNames();
  for (uint32_t i = 0; i < keys.Length(); ++i) {
    const Napi::Value v = obj_.Get(keys.Get(i));
    if (bf16(v)) return true;
    if (!v.IsArray()) continue;
    const Napi::Array list = v.As<Napi::Array>();  // a tensor list (null entries allowed)
    for (uint32_t k = 0; k < list.Length(); ++k)
      if (bf16(list.Get(k))) return true;
  }
  return false;
}

int64_t Args::length(const char* name) {
  Napi::Value v = field(name);
  return v.IsTypedArray() ? static_cast<int64_t>(v.As<Napi::TypedArray>().ElementLength()) : -1;
}

bool Args::given(const char* name) const {
  Napi::Value v = field(name);
  return !v.IsUndefined() && !v.IsNull();
}

int64_t Args::count(const int64_t* dims, size_t count) {
  constexpr int64_t kMax = int64_t(1) << 40;
  int64_t n = 1;
  bool over = false;
  for (size_t i = 0; i < count; ++i) {
    const int64_t d = dims[i];
    if (d < 0 || (d > 0 && n > kMax / d)) over = true;
    else n *= d;
  }
  if (over) {
    std::string list;
    for (size_t i = 0; i < count; ++i) list += (list.empty() ? "" : " x ") + std::to_string(dims[i]);
    fail("expected dims describing at most 2^40 elements but received " + list);
  }
  return n;
}

void* Args::typed(const char* name, int64_t len, napi_typedarray_type type, bool optional) {
  Napi::Value v = field(name);
  if (optional && (v.IsUndefined() || v.IsNull())) return nullptr;
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != type ||
      static_cast<int64_t>(v.As<Napi::TypedArray>().ElementLength()) != len)
    fail(std::string("expected a ") + typed_name(type) + " of length " + std::to_string(len) + " for " + name +
         " but received " + describe(v));
  Napi::TypedArray t = v.As<Napi::TypedArray>();
  Napi::ArrayBuffer buf = t.ArrayBuffer();
  if (buf.Data() == nullptr && len > 0) fail(std::string(name) + " is detached (a disposed tensor?)");
  arrays_.push_back(v);
  return static_cast<uint8_t*>(buf.Data()) + t.ByteOffset();
}

template <class E>
E* Args::array(const char* name, int64_t len, bool optional) {
  napi_typedarray_type type = napi_uint8_array;
  if constexpr (std::is_same_v<E, float>) type = napi_float32_array;
  else if constexpr (std::is_same_v<E, double>) type = napi_float64_array;
  else if constexpr (std::is_same_v<E, int32_t>) type = napi_int32_array;
  else if constexpr (std::is_same_v<E, ops::bf16>) type = napi_uint16_array;
  else static_assert(std::is_same_v<E, uint8_t>, "typed arrays of float, double, int32_t, bf16 or uint8_t");
  return static_cast<E*>(typed(name, len, type, optional));
}
template float* Args::array<float>(const char*, int64_t, bool);
template double* Args::array<double>(const char*, int64_t, bool);
template int32_t* Args::array<int32_t>(const char*, int64_t, bool);
template uint8_t* Args::array<uint8_t>(const char*, int64_t, bool);
template ops::bf16* Args::array<ops::bf16>(const char*, int64_t, bool);

void check(Napi::Env env, const Status& s) {
  if (!s.ok()) throw_error(env, s.code ? s.code : "ERR_NF_KERNEL", s.op + ": " + s.message);
}

namespace {

// Runs one op's job on a libuv worker thread and settles a Promise with its Status. The typed
// arrays stay referenced (no GC) and their buffers pinned (release() defers the detach) until the
// op has settled.
class OpWorker : public Napi::AsyncWorker {
 public:
  OpWorker(Napi::Env env, Job job, const std::vector<Napi::Value>& arrays)
      : Napi::AsyncWorker(env, "nodeformer:op"), job_(std::move(job)), deferred_(Napi::Promise::Deferred::New(env)) {
    std::vector<void*> data;
    for (const Napi::Value& a : arrays) {
      keep_.push_back(Napi::Persistent(a.As<Napi::Object>()));
      data.push_back(a.As<Napi::TypedArray>().ArrayBuffer().Data());
    }
    pinned_ = pin(data);
  }
  Napi::Promise promise() { return deferred_.Promise(); }

  void Execute() override {
    try {
      status_ = job_();
    } catch (const std::exception& e) {
      status_ = Status::Error("async op", e.what());
    }
  }
  void OnOK() override {
    Napi::Env env = Env();
    std::vector<Napi::ArrayBuffer> buffers;
    for (const Napi::ObjectReference& r : keep_) buffers.push_back(r.Value().As<Napi::TypedArray>().ArrayBuffer());
    unpin(pinned_, buffers);
    if (status_.ok()) {
      deferred_.Resolve(env.Undefined());
      return;
    }
    Napi::Error e = Napi::Error::New(env, status_.op + ": " + status_.message);
    e.Set("code", Napi::String::New(env, status_.code ? status_.code : "ERR_NF_KERNEL"));
    deferred_.Reject(e.Value());
  }

 private:
  Job job_;
  Status status_;
  Napi::Promise::Deferred deferred_;
  std::vector<Napi::ObjectReference> keep_;
  std::vector<void*> pinned_;
};

}  // namespace

void register_op(Napi::Env env, Napi::Object exports, const char* name, Parser parse) {
  export_op<Args>(
      env, exports, name, parse, [](Napi::Env e, const Job& job) { check(e, job()); },
      [](Napi::Env e, Job job, Args& args) {
        auto* worker = new OpWorker(e, std::move(job), args.arrays());
        Napi::Promise p = worker->promise();
        worker->Queue();
        return p;
      });
}

}  // namespace nf::napi
