// Reading one op's arguments. Every binding op takes a single options object whose fields are
// named like the kernel's parameters; Args reads and validates each field by name, so a bad
// argument becomes a JS Error (code ERR_NF_INVALID_ARG) that names the op and the argument.
// Float tensors are Float32Array (the fast kernels) or Float64Array (the float64 reference
// twins); one call uses one precision throughout.
#pragma once
#include <napi.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "../core/status.h"

namespace nf::napi {

class Args {
 public:
  Args(const Napi::CallbackInfo& info, const char* op);

  Napi::Env env() const { return env_; }
  const char* op() const { return op_; }

  // A required integer in [min, max].
  int64_t dim(const char* name, int64_t min = 1, int64_t max = (int64_t(1) << 40));
  // An optional integer in [min, max] (default when absent).
  int64_t integer(const char* name, int64_t def, int64_t min, int64_t max);
  // An optional finite number (default when absent), checked to lie in [min, max].
  double number(const char* name, double def, double min = -1e300, double max = 1e300);
  bool flag(const char* name, bool def);
  std::string text(const char* name, const std::string& def);

  // True when the float tensors of this call are Float64Array (decided by field `name`).
  bool is_f64(const char* name);
  // Whether any field of the options, or entry of a tensor list, is a Uint16Array (bfloat16 storage:
  // the call's T is ops::bf16).
  bool any_bf16() const;
  // The element count of typed array `name`, or -1 when the field is not a typed array.
  int64_t length(const char* name);
  // Whether field `name` is present (neither undefined nor null).
  bool given(const char* name) const;
  // The length of field `name` if it is a JS array (a tensor list, a list of sizes), else -1. An
  // entry of such a field is named "name[i]" wherever a field name is taken.
  int64_t list_length(const char* name) const;
  // How field `name`'s value reads in an error message ("Float32Array of length 3", "undefined").
  std::string describe_field(const char* name) const;
  // The product of dims, failing with a clear error past 2^40 elements (so lengths never overflow).
  int64_t count(std::initializer_list<int64_t> dims) { return count(dims.begin(), dims.size()); }
  int64_t count(const int64_t* dims, size_t n);

  // A typed array of E (float: Float32Array, double: Float64Array, int32_t: Int32Array, uint8_t:
  // Uint8Array, ops::bf16: Uint16Array) of exactly `len` elements; with `optional`, nullptr for null/undefined.
  template <class E>
  E* array(const char* name, int64_t len, bool optional = false);

  [[noreturn]] void fail(const std::string& message) const;

  // The typed arrays this call read: an async call keeps them alive until it settles.
  const std::vector<Napi::Value>& arrays() const { return arrays_; }

 protected:
  // The value of field `name`, or of entry i of array field `base` for a name "base[i]".
  Napi::Value field(const char* name) const;

 private:
  void* typed(const char* name, int64_t len, napi_typedarray_type type, bool optional);

  Napi::Env env_;
  const char* op_;
  Napi::Object obj_;
  std::vector<Napi::Value> arrays_;
};

// Throws a JS Error when a kernel reports a failure: code ERR_NF_KERNEL, or the Status's own code.
void check(Napi::Env env, const Status& s);

// Registers `name` on exports: a function taking one options object, whose `parse` reads and
// validates the arguments and returns the work to run (which reports a Status). Also registers
// `nameAsync`, which validates the same way on the calling thread, runs the work on a libuv
// worker thread (touching no JS there) and returns a Promise; the arrays it uses are kept alive
// until the Promise settles, and must not be modified meanwhile.
using Job = std::function<Status()>;
using Parser = Job (*)(Args&);
void register_op(Napi::Env env, Napi::Object exports, const char* name, Parser parse);

// Throws a JS Error with `code`; for binding helpers outside Args.
[[noreturn]] void throw_error(Napi::Env env, const char* code, const std::string& message);

}  // namespace nf::napi
