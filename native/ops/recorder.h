// The schema recorder: a reader (native/ops/schema.h) that writes an op's field declarations down as
// JSON instead of reading anything. The addons export it (opSchema()); scripts/gen_native_types.js
// turns it into lib/native/ops.generated.ts, and the parity suite walks it.
//   {"name": "layernormForward", "doc": "...", "fields": [
//     {"name": "rows", "kind": "dim", "min": 0},
//     {"name": "eps", "kind": "number", "default": 1e-05},
//     {"name": "act", "kind": "choice", "type": "Activation", "choices": ["none", ...], "default": "none"},
//     {"name": "out", "kind": "array", "role": "out", "dtype": "real", "shape": "[rows, D]",
//      "optional": false, "when": "...", "gradOf": "x", "doc": "..."},
//     {"name": "sizes", "kind": "sizes", "min": 0}, ...], "hostOnly": false}
// A tensor list (schema.h's in_list etc.) is an array field with "list": true, its shape an entry's.
// `optional`: may be absent (in some calls, those `requiredWhen` does not describe); `when`: read
// only in the calls it describes (required there unless optional), ignored in the others.
// `hostOnly`: the op runs on the host CPU only by nature (schema.h); every other op has a kernel on
// every backend.
// The recorder gives every dim its smallest valid value, every pointer a dummy address and says
// every field is given, so `fields` runs straight through; its checks are ignored.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "schema.h"

namespace nf::ops {

inline std::string json_string(const char* s) {
  if (!s) return "null";
  std::string out = "\"";
  for (const char* c = s; *c; ++c) {
    switch (*c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(*c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", *c);
          out += buf;
        } else {
          out += *c;
        }
    }
  }
  return out + "\"";
}

inline std::string json_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// "p.B, p.Tq, 3 * p.D" -> "[B, Tq, 3 * D]": the shape's source expressions without qualifiers.
inline std::string shape_text(const Shape& s) {
  if (!s.from_expressions) return s.text;
  std::string out = "[";
  const char* t = s.text;
  while (*t) {
    const char* w = t;  // an identifier followed by '.' is a qualifier: skip it
    while ((*w >= 'a' && *w <= 'z') || (*w >= 'A' && *w <= 'Z') || (*w >= '0' && *w <= '9') || *w == '_') ++w;
    if (w != t && *w == '.' && !(*t >= '0' && *t <= '9')) {
      t = w + 1;
      continue;
    }
    if (w != t) {
      out.append(t, w);
      t = w;
    } else {
      out += *t++;
    }
  }
  return out + "]";
}

inline const char* role_name(Role r) {
  switch (r) {
    case Role::in: return "in";
    case Role::out: return "out";
    case Role::inout: return "inout";
    default: return "saved";
  }
}

inline const char* dtype_name(DType d) {
  switch (d) {
    case DType::real: return "real";
    case DType::f64: return "f64";
    case DType::i32: return "i32";
    case DType::f32: return "f32";
    default: return "u8";
  }
}

class Recorder : public FieldReader<Recorder, float> {
 public:
  void dim(int64_t& v, const char* name, int64_t min = 1, int64_t max = kMaxDim) {
    v = min > 1 ? min : (max < 1 ? max : 1);
    add(name, "\"kind\": \"dim\", \"min\": " + std::to_string(min) + ", \"max\": " + std::to_string(max));
  }
  void dim(int64_t& v, const char* name, int64_t min, int64_t max, When w) {
    v = min > 1 ? min : (max < 1 ? max : 1);
    add(name, "\"kind\": \"dim\", \"min\": " + std::to_string(min) + ", \"max\": " + std::to_string(max) +
                  ", \"when\": " + json_string(w.text));
  }
  template <class I>
  void integer(I& v, const char* name, int64_t def, int64_t min, int64_t max) {
    v = static_cast<I>(def);
    add(name, "\"kind\": \"integer\", \"min\": " + std::to_string(min) + ", \"max\": " + std::to_string(max));
  }
  template <class F>
  void number(F& v, const char* name, double def, double min = -1e300, double max = 1e300) {
    v = static_cast<F>(def);
    add(name, "\"kind\": \"number\", \"default\": " + json_number(def) + range(min, max));
  }
  template <class F>
  void required_number(F& v, const char* name, double min = -1e300, double max = 1e300) {
    v = static_cast<F>(min > 1 ? min : (max < 1 ? max : 1));
    add(name, "\"kind\": \"number\", \"required\": true" + range(min, max));
  }
  void flag(bool& v, const char* name, bool def) {
    v = def;
    add(name, std::string("\"kind\": \"flag\", \"default\": ") + (def ? "true" : "false"));
  }
  template <class E>
  void choice(E& v, const char* name, const Choices<E>& c, E def) {
    v = def;
    std::string list, def_name = "null";
    for (size_t i = 0; i < c.n; ++i) {
      list += (i ? ", " : "") + json_string(c.list[i].name);
      if (c.list[i].value == def) def_name = json_string(c.list[i].name);
    }
    add(name, "\"kind\": \"choice\", \"type\": " + json_string(c.type) + ", \"choices\": [" + list +
                  "], \"default\": " + def_name);
  }
  template <class E>
  void array(E*& ptr, const Field& f) {
    ptr = reinterpret_cast<E*>(&dummy_);
    if (f.dtype == DType::real && f.always_required()) required_real_.push_back(f.name);
    add(f.name, std::string("\"kind\": \"array\", \"role\": \"") + role_name(f.role) + "\", \"dtype\": \"" +
                    dtype_name(f.dtype) + "\", \"shape\": " + json_string(shape_text(f.shape).c_str()) +
                    ", \"orLonger\": " + (f.shape.at_least ? "true" : "false") +
                    (f.list ? ", \"list\": true" : "") +
                    ", \"optional\": " + (f.optional || f.required_when ? "true" : "false") +
                    ", \"when\": " + json_string(f.when) + ", \"requiredWhen\": " + json_string(f.required_when) +
                    ", \"gradOf\": " + json_string(f.grad_of) +
                    ", \"doc\": " + json_string(f.doc));
  }
  void sizes(std::vector<int64_t>& v, const char* name, int64_t min = 0) {
    v.assign(1, min > 1 ? min : 1);
    add(name, "\"kind\": \"sizes\", \"min\": " + std::to_string(min));
  }
  template <class E>
  void list(std::vector<E*>& ptrs, const Field& f, const std::vector<int64_t>& sizes) {
    ptrs.assign(sizes.size(), nullptr);
    for (E*& p : ptrs) array(p, f);
  }
  template <class F>
  void check_values(F&&) {}
  bool given(const char*) { return true; }
  template <class E>
  int64_t length(const char*, E*) {
    return -1;
  }
  int64_t count(const Shape& s) {
    int64_t n = 1;
    for (int i = 0; i < s.rank; ++i) n *= s.dim[i];
    return n;
  }
  void fail(const std::string&) {}

  // The fields recorded, as a JSON array body.
  const std::string& fields() const { return fields_; }
  // The float tensors every call must give (their array types decide a call's precision).
  const std::vector<std::string>& required_real() const { return required_real_; }

 private:
  static std::string range(double min, double max) {
    std::string s;
    if (min > -1e300) s += ", \"min\": " + json_number(min);
    if (max < 1e300) s += ", \"max\": " + json_number(max);
    return s;
  }
  void add(const char* name, const std::string& rest) {
    fields_ += (fields_.empty() ? "" : ", ") + std::string("{\"name\": ") + json_string(name) + ", " + rest + "}";
  }
  std::string fields_;
  std::vector<std::string> required_real_;
  alignas(64) unsigned char dummy_[64] = {};
};

// The JSON of op P<float> (its name, doc, fields and whether it is host-only, schema.h) with
// `extra` members appended.
template <template <class> class P>
std::string record_op(const std::string& extra = "") {
  Recorder r;
  P<float> p;
  P<float>::fields(r, p);
  return "{\"name\": " + json_string(P<float>::name) + ", \"doc\": " + json_string(P<float>::summary) +
         ", \"fields\": [" + r.fields() + "], \"hostOnly\": " + (host_only_v<P<float>> ? "true" : "false") + extra +
         "}";
}

}  // namespace nf::ops
