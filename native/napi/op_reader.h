// The bindings' reader of op schemas (native/ops/schema.h): fills an op's params struct from the JS
// options object, field by field, with Args's validation and messages (a bad field is a JS Error,
// code ERR_NF_INVALID_ARG, naming the op and the field). One reader serves both addons; A is the
// argument source and decides only how a field's name becomes a pointer:
//   Args        (the CPU addon): typed arrays, Float32Array or Float64Array for T;
//   DeviceArgs  (the CUDA addon, native/cuda/napi/device_args.h): device buffers.
// A source provides pointer<E>(name, len, optional, at_least), array_length<E>(name) and says
// whether its arrays are host memory (host_memory).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "../ops/schema.h"
#include "args.h"

namespace nf::napi {

// The CPU addon's step from a name to a pointer: a typed array of E (Float32Array, Float64Array,
// Int32Array or Uint8Array) of exactly `len` elements (at least, when at_least).
template <class E>
E* host_pointer(Args& a, const char* name, int64_t len, bool optional, bool at_least) {
  using V = std::remove_const_t<E>;
  if (at_least && a.length(name) > len) len = a.length(name);
  return a.array<V>(name, len, optional);
}

struct HostSource {
  static constexpr bool host_memory = true;  // the arrays' values can be read here
  Args& a;
  template <class E>
  E* pointer(const char* name, int64_t len, bool optional, bool at_least) {
    return host_pointer<E>(a, name, len, optional, at_least);
  }
  template <class E>
  int64_t array_length(const char* name) {
    return a.length(name);
  }
};

template <class T, class Source>
class OpReader : public ops::FieldReader<OpReader<T, Source>, T> {
 public:
  OpReader(Args& a, Source src) : a_(a), src_(src) {}

  void dim(int64_t& v, const char* name, int64_t min = 1, int64_t max = ops::kMaxDim) { v = a_.dim(name, min, max); }
  void dim(int64_t& v, const char* name, int64_t min, int64_t max, ops::When w) {
    if (w.cond) v = a_.dim(name, min, max);
  }
  template <class I>
  void integer(I& v, const char* name, int64_t def, int64_t min, int64_t max) {
    v = static_cast<I>(a_.integer(name, def, min, max));
  }
  template <class F>
  void number(F& v, const char* name, double def, double min = -1e300, double max = 1e300) {
    v = static_cast<F>(a_.number(name, def, min, max));
  }
  template <class F>
  void required_number(F& v, const char* name, double min = -1e300, double max = 1e300) {
    if (!a_.given(name)) a_.fail(std::string("expected a number for ") + name + " but received nothing");
    v = static_cast<F>(a_.number(name, 0.0, min, max));
  }
  void flag(bool& v, const char* name, bool def) { v = a_.flag(name, def); }
  template <class E>
  void choice(E& v, const char* name, const ops::Choices<E>& c, E def) {
    const char* def_name = "";
    for (size_t i = 0; i < c.n; ++i)
      if (c.list[i].value == def) def_name = c.list[i].name;
    const std::string s = a_.text(name, def_name);
    for (size_t i = 0; i < c.n; ++i)
      if (s == c.list[i].name) {
        v = c.list[i].value;
        return;
      }
    std::string names;
    for (size_t i = 0; i < c.n; ++i)
      names += (i == 0 ? "'" : i + 1 == c.n ? " or '" : ", '") + std::string(c.list[i].name) + "'";
    a_.fail("expected " + names + " for " + name + " but received '" + s + "'");
  }

  template <class E>
  void array(E*& ptr, const ops::Field& f) {
    if (!f.active) {
      ptr = nullptr;
      return;
    }
    const int64_t len = count(f.shape);
    ptr = src_.template pointer<E>(f.name, len, f.optional, f.shape.at_least);
  }

  void sizes(std::vector<int64_t>& v, const char* name, int64_t min = 0) {
    const int64_t k = a_.list_length(name);
    if (k < 0) a_.fail(std::string("expected an array of integers for ") + name + " but received " + a_.describe_field(name));
    v.resize(size_t(k));
    for (int64_t i = 0; i < k; ++i) v[size_t(i)] = a_.dim(entry(name, i).c_str(), min, ops::kMaxDim);
  }
  // A tensor list: a JS array with one tensor per size (null entries, or no array, when optional).
  template <class E>
  void list(std::vector<E*>& ptrs, const ops::Field& f, const std::vector<int64_t>& sizes) {
    ptrs.assign(sizes.size(), nullptr);
    if (!f.active || (f.optional && !a_.given(f.name))) return;
    if (a_.list_length(f.name) != int64_t(sizes.size()))
      a_.fail(std::string("expected an array of ") + std::to_string(sizes.size()) + " tensors for " + f.name +
              " but received " + a_.describe_field(f.name));
    for (size_t i = 0; i < sizes.size(); ++i)
      ptrs[i] = src_.template pointer<E>(entry(f.name, int64_t(i)).c_str(), sizes[i], f.optional, false);
  }

  // A check of array values (ids or targets in range): run before any work where the arrays are
  // host memory, its error an invalid argument; device buffers are checked by their kernels.
  template <class F>
  void check_values(F&& check) {
    if constexpr (Source::host_memory) {
      const Status s = check();
      if (!s.ok()) a_.fail(s.message);
    }
  }

  bool given(const char* name) { return a_.given(name); }
  template <class E>
  int64_t length(const char* name, E* /*type*/) {
    return src_.template array_length<std::remove_const_t<E>>(name);
  }
  int64_t count(const ops::Shape& s) { return a_.count(s.dim, size_t(s.rank)); }
  [[noreturn]] void fail(const std::string& message) { a_.fail(message); }

 private:
  static std::string entry(const char* name, int64_t i) { return std::string(name) + "[" + std::to_string(i) + "]"; }

  Args& a_;
  Source src_;
};

}  // namespace nf::napi
