// The vocabulary of op schemas: how an op declares its arguments once, for every backend.
//
// An op is a params struct templated on the element type T of its float tensors (float for the
// fast CPU kernels and the CUDA kernels, double for the float64 reference twins, bf16 for the CUDA
// kernels of precision 'bf16': activations in bfloat16, see Acc below), holding its dims,
// its scalar parameters and every pointer (flash-attention style), plus ONE static declaration of
// its fields:
//
//   template <class T>
//   struct LayerNormForward {
//     static constexpr const char* name = "layernormForward";   // the addons' function name
//     static constexpr const char* summary = "out = LN(x) ...";  // the TypeScript doc comment
//     int64_t rows = 0, D = 0;
//     double eps = 1e-5;
//     T* out = nullptr;
//     const T* x = nullptr;
//     ...
//     template <class R>
//     static void fields(R& r, LayerNormForward& p) {
//       r.dim(p.rows, "rows", 0);
//       r.dim(p.D, "D");
//       r.number(p.eps, "eps", 1e-5, 1e-30, 1.0);
//       r.out(p.out, "out", NF_SHAPE(p.rows, p.D));
//       r.in(p.x, "x", NF_SHAPE(p.rows, p.D));
//       ...
//     }
//   };
//
// `fields` reads each field in order through a reader R; every reader implements the same small
// interface (below), and what a reader does with a field is its own business:
//   - the CPU binding's reader (native/napi/op_reader.h) turns JS values into dims and typed-array
//     pointers, validating each and failing with an Error that names the op and the field;
//   - the CUDA binding's reader is the same reader over device buffers (only the step from a name
//     to a pointer differs);
//   - the schema recorder (native/ops/recorder.h) writes the declaration down as JSON, from which
//     the raw addon's TypeScript interface is generated (scripts/gen_native_types.js) and which the
//     parity suite walks (test/ops_parity.test.ts).
// Rules for `fields`, so every reader sees every field:
//   - read every field unconditionally, in a fixed order (dims first, then the arrays);
//   - a field read only in some calls says so with `when(cond, "text")` (read, and required unless
//     also `optional`, when cond holds; ignored otherwise; dims too), never with an `if` around it;
//   - a check between fields is `if (bad) r.fail("message")` (the recorder ignores it).
// Kernels take `const Params<T>&` and every backend's kernel for op X is `run(const X<T>&)` in its
// own namespace (nf::cpu, nf::ref, nf::cuda): the bindings find them by overload, so a backend
// supports an op exactly when it declares that overload (native/cpu/ops.h, native/cpu/ref/ops.h,
// native/cuda/ops.h), and there is no other list of what runs where.
// An op that is host-only by nature (a CPU measurement, a CPU kernel's private weight layout) says
// so in its params struct, `static constexpr bool host_only = true;`: no device backend implements
// it (the CUDA binding refuses one that tried), the recorder writes `"hostOnly": true` into its
// schema, and every other op of the table must have a kernel on every backend.
//
// The reader interface (R):
//   dim(int64_t& v, name, min = 1, max = 2^40 [, When])      a required integer in [min, max]
//                                                             (with When: read only when cond)
//   integer(I& v, name, def, min, max)                        an optional integer (default def)
//   number(F& v, name, def, min = -1e300, max = 1e300)        an optional finite number
//   required_number(F& v, name, min = -1e300, max = 1e300)    a number the caller must give
//   flag(bool& v, name, def)                                  an optional boolean
//   choice(E& v, name, const Choices<E>&, E def)              one of a list of names (an enum)
//   in / out / inout / saved(E*& ptr, name, Shape [, options]) a tensor (E: T, Acc<T>, double,
//                                                             int32_t, uint8_t; const for what is only read)
//   sizes(std::vector<int64_t>& v, name, min = 0)            a required list of integers in [min, 2^40]
//                                                             (the element counts of a tensor list)
//   in_list / inout_list / out_list(std::vector<E*>& ptrs,   a list of tensors, entry i of sizes[i]
//       name, const std::vector<int64_t>& sizes [, options])  elements (multi-tensor ops: an optimizer
//                                                             step over many parameters); `optional`: the
//                                                             list may be absent (all null) and any entry null
//   check_values(F check)                                     check() -> Status over arrays already
//                                                             read (ids in range): run where they are
//                                                             host memory, before any work
//   bool given(name)                                          whether the field is present
//   int64_t length(name, E* tag)                              the element count of array `name`
//                                                             (-1 when it is not an array of E)
//   int64_t count(const Shape&)                               a shape's element count (the reader
//                                                             fails past 2^40 elements)
//   fail(message)                                             rejects the call
#pragma once
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

// A helper of an op header compiled for the host and, under nvcc, for the device too (so every
// backend shares it).
#ifdef __CUDACC__
#define NF_HOST_DEVICE __host__ __device__
#else
#define NF_HOST_DEVICE
#endif

namespace nf::ops {

// What an array is to the op.
enum class Role : uint8_t {
  in,     // read only
  out,    // overwritten
  inout,  // read and updated in place: accumulated gradients (+=), optimizer state
  saved,  // forward: written for its backward; backward: the forward's saved buffer, read
};

// The element type of an array: `real` is the call's T (Float32Array or Float64Array), the others
// are fixed whatever T is; `f32` is an Acc<T> field of a bf16 call (float32 storage: see Acc).
enum class DType : uint8_t { real, f64, i32, u8, f32 };

// bfloat16 storage: the upper 16 bits of an IEEE float32 (sign, 8-bit exponent, 7-bit mantissa),
// what the CUDA kernels of precision 'bf16' keep activations in (half the bytes of float32). A
// storage type only: kernels convert to float on load and round to nearest even on store
// (native/cuda/bf16.cuh); the float64 reference reads the rounded values as doubles.
struct bf16 {
  uint16_t bits;
};

// The element type of what stays at least float32 in a call whose activations are T, as
// torch.autocast(dtype=bfloat16) keeps it: parameters and their gradients (fp32 masters), LayerNorm
// statistics, losses. T itself for float and double (so the CPU and reference ops are unchanged);
// float for bf16. An op declares such a field `Acc<T>*`, its activations (and the bf16 weight copy
// a GEMM reads) `T*`.
template <class T>
using Acc = std::conditional_t<std::is_same_v<T, bf16>, float, T>;

// A tensor's shape: its dims (values, for the readers' length checks) and how the schema shows it
// ("[B, Tq, D]"). NF_SHAPE(p.B, p.Tq, p.D) takes the text from the expressions themselves (the
// recorder drops the `p.` qualifiers); Shape("[rows, inFeatures]", p.rows, p.in) gives it by hand.
struct Shape {
  static constexpr int kMaxRank = 6;
  int64_t dim[kMaxRank] = {};
  int rank = 0;
  const char* text = "";
  bool from_expressions = false;  // text is the dims' source expressions, not a finished shape
  bool at_least = false;          // the array may be longer (a view into a larger buffer)

  Shape() = default;
  template <class... D>
  explicit Shape(const char* t, D... d) : dim{static_cast<int64_t>(d)...}, rank(int(sizeof...(D))), text(t) {
    static_assert(sizeof...(D) <= kMaxRank, "at most 6 dims");
  }
  // A shape given by its source expressions (what NF_SHAPE makes).
  template <class... D>
  static Shape expressions(const char* t, D... d) {
    Shape s(t, d...);
    s.from_expressions = true;
    return s;
  }
  // One dim of `n` elements whose text is `t`: for extents computed by hand (strided operands).
  static Shape flat(int64_t n, const char* t) { return Shape(t, n); }
  // The array holds at least this many elements (the rest belongs to others).
  Shape& or_longer() {
    at_least = true;
    return *this;
  }
};
#define NF_SHAPE(...) ::nf::ops::Shape::expressions(#__VA_ARGS__, __VA_ARGS__)

// Field options, given after the shape in any order.
// May be absent (null or undefined): the pointer is then null.
struct Optional {};
inline constexpr Optional optional{};
// Read only when `cond` holds (required then, unless also `optional`); otherwise not read at all
// (null, whatever the caller passed). `text` says when, for the schema. Also for dims.
struct When {
  bool cond;
  const char* text;
};
inline When when(bool cond, const char* text) { return {cond, text}; }
// Required when `cond` holds, optional otherwise; `text` says when, for the schema.
struct RequiredIf {
  bool cond;
  const char* text;
};
inline RequiredIf required_if(bool cond, const char* text) { return {cond, text}; }
// The gradient of field `of` (of the forward op; "out" for the gradient flowing in).
struct GradOf {
  const char* of;
};
inline GradOf grad_of(const char* of) { return {of}; }
// A doc comment for the field.
struct Doc {
  const char* text;
};
inline Doc doc(const char* text) { return {text}; }

// Everything said about one array field.
struct Field {
  const char* name = "";
  Role role = Role::in;
  DType dtype = DType::real;
  Shape shape;
  bool optional = false;        // may be absent
  bool active = true;           // this call reads it (false: a `when` whose condition fails)
  bool list = false;            // a list of tensors (in_list etc.): `shape` is one entry's
  const char* when = nullptr;   // the condition's text, for a conditional field
  const char* required_when = nullptr;  // for an optional field required in some calls
  const char* grad_of = nullptr;
  const char* doc = nullptr;

  // Whether this call must give it.
  bool required() const { return active && !optional; }
  // Whether every call must give it.
  bool always_required() const { return !optional && !when && !required_when; }
};

inline void apply(Field& f, Optional) { f.optional = true; }
inline void apply(Field& f, When w) {
  f.active = w.cond;
  f.when = w.text;
}
inline void apply(Field& f, RequiredIf r) {
  f.optional = !r.cond;
  f.required_when = r.text;
}
inline void apply(Field& f, GradOf g) { f.grad_of = g.of; }
inline void apply(Field& f, Doc d) { f.doc = d.text; }

// The dtype of an array of E in a call whose float element type is T.
template <class T, class E>
constexpr DType dtype_of() {
  using V = std::remove_const_t<E>;
  if constexpr (std::is_same_v<V, T>) return DType::real;
  else if constexpr (std::is_same_v<V, float>) return DType::f32;  // an Acc<T> field of a bf16 call
  else if constexpr (std::is_same_v<V, double>) return DType::f64;
  else if constexpr (std::is_same_v<V, int32_t>) return DType::i32;
  else {
    static_assert(std::is_same_v<V, uint8_t>, "array elements are T, Acc<T>, double, int32_t or uint8_t");
    return DType::u8;
  }
}

// A named value of an enum field: the JS string and the enum value.
template <class E>
struct Choice {
  const char* name;
  E value;
};
// The names an enum field accepts, and the TypeScript type they form (e.g. 'Activation').
template <class E>
struct Choices {
  const char* type;
  const Choice<E>* list;
  size_t n;
  template <size_t N>
  constexpr Choices(const char* t, const Choice<E> (&l)[N]) : type(t), list(l), n(N) {}
};

// The helpers every reader shares: in/out/inout/saved build the Field and pass it to the reader's
// array(ptr, field). Derived: the reader (CRTP); T: the call's float element type.
template <class Derived, class T>
class FieldReader {
 public:
  using Real = T;

  template <class E, class... O>
  void in(E*& ptr, const char* name, const Shape& s, O... o) {
    self().array(ptr, field<E>(Role::in, name, s, o...));
  }
  template <class E, class... O>
  void out(E*& ptr, const char* name, const Shape& s, O... o) {
    self().array(ptr, field<E>(Role::out, name, s, o...));
  }
  template <class E, class... O>
  void inout(E*& ptr, const char* name, const Shape& s, O... o) {
    self().array(ptr, field<E>(Role::inout, name, s, o...));
  }
  template <class E, class... O>
  void saved(E*& ptr, const char* name, const Shape& s, O... o) {
    self().array(ptr, field<E>(Role::saved, name, s, o...));
  }
  // Tensor lists: entry i holds sizes[i] elements (the reader checks each).
  template <class E, class... O>
  void in_list(std::vector<E*>& ptrs, const char* name, const std::vector<int64_t>& sizes, O... o) {
    self().list(ptrs, list_field<E>(Role::in, name, o...), sizes);
  }
  template <class E, class... O>
  void inout_list(std::vector<E*>& ptrs, const char* name, const std::vector<int64_t>& sizes, O... o) {
    self().list(ptrs, list_field<E>(Role::inout, name, o...), sizes);
  }
  template <class E, class... O>
  void out_list(std::vector<E*>& ptrs, const char* name, const std::vector<int64_t>& sizes, O... o) {
    self().list(ptrs, list_field<E>(Role::out, name, o...), sizes);
  }

 private:
  Derived& self() { return static_cast<Derived&>(*this); }
  template <class E, class... O>
  static Field field(Role role, const char* name, const Shape& s, O... o) {
    Field f;
    f.name = name;
    f.role = role;
    f.dtype = dtype_of<T, E>();
    f.shape = s;
    (apply(f, o), ...);
    return f;
  }
  template <class E, class... O>
  static Field list_field(Role role, const char* name, O... o) {
    Field f = field<E>(role, name, Shape("[sizes[i]]", 0), o...);
    f.list = true;
    return f;
  }
};

// Whether op params type P is host-only (declares `static constexpr bool host_only = true`).
template <class P, class = void>
struct is_host_only : std::false_type {};
template <class P>
struct is_host_only<P, std::void_t<decltype(P::host_only)>> : std::bool_constant<P::host_only> {};
template <class P>
inline constexpr bool host_only_v = is_host_only<P>::value;

// The largest integer a JS number holds exactly: the bound of seeds and offsets.
constexpr int64_t kMaxSafeInteger = (int64_t(1) << 53) - 1;
// The bound of a dim (and, through the readers' count, of any array's element count).
constexpr int64_t kMaxDim = int64_t(1) << 40;

}  // namespace nf::ops
