// nodeformer's CPU stand-in for cuBLASLt: a small shared library (libnf_cublaslt_standin.so) that
// exports the cuBLASLt entry points native/cuda/cublaslt_api.h declares, with their documented
// semantics, computed on the CPU with a plain loop. The emulated CUDA build (whose "device" memory
// is host memory) loads it through the same dlopen path as the real library (NF_CUBLASLT_PATH), so
// the whole call path — descriptors, layouts, transposes, leading dimensions, strided batches,
// alpha/beta, epilogues and their pointers, compute types, the preference, the heuristic query, the
// workspace — runs in CI without a GPU. Never for a GPU build (the loader refuses it there).
//
// Semantics (docs.nvidia.com/cuda/cublas, cublasLtMatmul and cublasLtEpilogue_t):
//   D = epilogue(alpha op(A) op(B) + beta C), column-major: element (i, j) of an r x c matrix with
//   leading dimension ld is at [i + j ld], batch entry z at + z stride. C is not read when beta = 0.
//   BIAS adds bias[i] (length m, the rows of D); GELU is the tanh form; *_AUX writes the GELU input
//   to aux[i + j aux_ld]; DGELU multiplies by gelu'(aux); BGRADB writes bias[j] = Σ_k op(B)[k, j]
//   (overwritten; computed from the stored fp32 values).
//   Compute types: CUBLAS_COMPUTE_32F takes the inputs as they are; _FAST_TF32 rounds each input
//   to TF32 (10-bit mantissa) and _FAST_16BF to bfloat16 (7-bit), round-to-nearest-even, before
//   multiplying. Products are summed in double and rounded to float once (a GPU sums in float).
//   Data types: A and B both CUDA_R_32F, or both CUDA_R_16BF (then COMPUTE_32F only); C and D one
//   type, CUDA_R_32F or (with bf16 A and B) CUDA_R_16BF, rounded to nearest even from the float
//   result; the aux buffer, the bias and BGRADB's output are D's type (BIAS_DATA_TYPE may only
//   restate it: cublasLt.h allows another type for int8 and fp8 kernels alone, and the library
//   offers no algorithm for an fp32 bias with a bf16 D).
// Checks the real library makes (an error status, never a crash): attribute value sizes, layouts
// consistent with m, n, k and the transposes, ld >= rows, column order, CUDA_R_32F data, host
// pointer mode, the data types' combination, the epilogue's pointers present, the GELU aux leading dimension divisible by 8,
// the workspace at least what the heuristic asked for, the operands at least as aligned as the
// preference promised, the algorithm one the heuristic returned for this configuration.
// NF_CUBLASLT_STANDIN_REFUSE=bias,relu,gelu,dgelu,bgradb,batched,tf32,bf16,all (a comma list) makes
// the heuristic offer no algorithm for those products: how tests exercise the callers' fallbacks.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "cublaslt_api.h"

#define NF_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

constexpr uint32_t kHandleMagic = 0x4e464c48, kDescMagic = 0x4e464c44, kLayoutMagic = 0x4e464c4c,
                   kPrefMagic = 0x4e464c50, kAlgoMagic = 0x4e464c41;

struct Handle {
  uint32_t magic = kHandleMagic;
};
struct Desc {
  uint32_t magic = kDescMagic;
  int32_t compute = 0, scale = 0, pointer_mode = 0, transa = 0, transb = 0;
  uint32_t epilogue = NF_CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  int64_t bias_stride = 0;
  const void* aux = nullptr;
  int64_t aux_ld = 0, aux_stride = 0;
  int32_t bias_type = -1;  // -1: D's type
};
struct Layout {
  uint32_t magic = kLayoutMagic;
  uint32_t type = 0;
  int32_t order = 0, batch = 1;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0, stride = 0;
};
struct Pref {
  uint32_t magic = kPrefMagic;
  uint32_t search = 0;
  uint64_t max_workspace = 0;
  uint32_t align[4] = {256, 256, 256, 256};  // A, B, C, D (the documented default)
};

template <class T>
T* as(void* p, uint32_t magic) {
  T* t = static_cast<T*>(p);
  return t && t->magic == magic ? t : nullptr;
}

// Copies an attribute's value when its size is the documented one.
template <class T>
bool take(T* field, const void* buf, size_t size) {
  if (!buf || size != sizeof(T)) return false;
  std::memcpy(field, buf, sizeof(T));
  return true;
}

bool refused(const char* what) {
  const char* v = std::getenv("NF_CUBLASLT_STANDIN_REFUSE");
  if (!v || !*v) return false;
  const std::string list = std::string(",") + v + ",";
  return list.find(std::string(",") + what + ",") != std::string::npos || list.find(",all,") != std::string::npos;
}

bool has(uint32_t epilogue, uint32_t bits) { return (epilogue & bits) == bits; }

bool known_epilogue(uint32_t e) {
  switch (e) {
    case NF_CUBLASLT_EPILOGUE_DEFAULT:
    case NF_CUBLASLT_EPILOGUE_RELU:
    case NF_CUBLASLT_EPILOGUE_BIAS:
    case NF_CUBLASLT_EPILOGUE_RELU_BIAS:
    case NF_CUBLASLT_EPILOGUE_GELU:
    case NF_CUBLASLT_EPILOGUE_GELU_AUX:
    case NF_CUBLASLT_EPILOGUE_GELU_BIAS:
    case NF_CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
    case NF_CUBLASLT_EPILOGUE_DGELU:
    case NF_CUBLASLT_EPILOGUE_BGRADB: return true;
    default: return false;  // DRELU's bit-mask aux, BGRADA, *_BGRAD: not implemented here
  }
}
bool is_gelu_forward(uint32_t e) { return e == 32 || e == (32 | 128) || e == (32 | 4) || e == (32 | 128 | 4); }
bool writes_aux(uint32_t e) { return e == NF_CUBLASLT_EPILOGUE_GELU_AUX || e == NF_CUBLASLT_EPILOGUE_GELU_AUX_BIAS; }
bool adds_bias(uint32_t e) { return e != NF_CUBLASLT_EPILOGUE_BGRADB && has(e, NF_CUBLASLT_EPILOGUE_BIAS); }

// The product's shape, checked against the layouts and the descriptor.
struct Shape {
  int64_t m, n, k, batch;
  int d_type;
};
nf_cublasStatus_t shape_of(const Desc& d, const Layout& a, const Layout& b, const Layout& c, const Layout& dd,
                           Shape* s) {
  for (const Layout* l : {&a, &b, &c, &dd}) {
    if ((l->type != NF_CUDA_R_32F && l->type != NF_CUDA_R_16BF) || l->order != 0) return NF_CUBLAS_STATUS_NOT_SUPPORTED;
    if (l->ld < int64_t(l->rows > 0 ? l->rows : 1) || l->batch < 1) return NF_CUBLAS_STATUS_INVALID_VALUE;
  }
  const bool bf16_in = a.type == NF_CUDA_R_16BF;
  if (b.type != a.type || c.type != dd.type || (dd.type == NF_CUDA_R_16BF && !bf16_in) ||
      (bf16_in && d.compute != NF_CUBLAS_COMPUTE_32F))
    return NF_CUBLAS_STATUS_NOT_SUPPORTED;
  const int64_t m = int64_t(dd.rows), n = int64_t(dd.cols);
  const int64_t am = int64_t(d.transa ? a.cols : a.rows), ak = int64_t(d.transa ? a.rows : a.cols);
  const int64_t bk = int64_t(d.transb ? b.cols : b.rows), bn = int64_t(d.transb ? b.rows : b.cols);
  if (am != m || bn != n || ak != bk) return NF_CUBLAS_STATUS_INVALID_VALUE;
  if (c.rows != dd.rows || c.cols != dd.cols) return NF_CUBLAS_STATUS_INVALID_VALUE;
  if (a.batch != dd.batch || b.batch != dd.batch || c.batch != dd.batch) return NF_CUBLAS_STATUS_INVALID_VALUE;
  *s = {m, n, ak, dd.batch, int(dd.type)};
  return NF_CUBLAS_STATUS_SUCCESS;
}

// The workspace the stand-in asks for: BGRADB and DGELU keep per-column double partials there.
size_t workspace_for(const Desc& d, const Shape& s) {
  return d.epilogue == NF_CUBLASLT_EPILOGUE_BGRADB ? size_t(s.n) * sizeof(double) : 0;
}

// Whether the heuristic offers an algorithm; the reason it does not otherwise.
nf_cublasStatus_t supported(const Desc& d, const Shape& s, const Pref& p) {
  if (d.compute != NF_CUBLAS_COMPUTE_32F && d.compute != NF_CUBLAS_COMPUTE_32F_FAST_TF32 &&
      d.compute != NF_CUBLAS_COMPUTE_32F_FAST_16BF)
    return NF_CUBLAS_STATUS_NOT_SUPPORTED;
  if (d.scale != NF_CUDA_R_32F || d.pointer_mode != 0 || !known_epilogue(d.epilogue)) return NF_CUBLAS_STATUS_NOT_SUPPORTED;
  const bool bias_vector = adds_bias(d.epilogue) || d.epilogue == NF_CUBLASLT_EPILOGUE_BGRADB;
  if (bias_vector && !d.bias) return NF_CUBLAS_STATUS_INVALID_VALUE;
  if (bias_vector && d.bias_type >= 0 && d.bias_type != s.d_type) return NF_CUBLAS_STATUS_NOT_SUPPORTED;
  const bool uses_aux = writes_aux(d.epilogue) || d.epilogue == NF_CUBLASLT_EPILOGUE_DGELU;
  if (uses_aux && (!d.aux || d.aux_ld < s.m || d.aux_ld % 8 != 0 || (s.batch > 1 && d.aux_stride % 8 != 0)))
    return NF_CUBLAS_STATUS_NOT_SUPPORTED;  // "Must be divisible by 8 and be no less than the number of rows"
  for (uint32_t a : p.align)
    if (a < 2 || (a & (a - 1))) return NF_CUBLAS_STATUS_NOT_SUPPORTED;  // elements are at least 2-byte aligned
  if (workspace_for(d, s) > p.max_workspace) return NF_CUBLAS_STATUS_NOT_SUPPORTED;
  const uint32_t e = d.epilogue;
  if ((refused("bias") && adds_bias(e)) || (refused("relu") && has(e, NF_CUBLASLT_EPILOGUE_RELU)) ||
      (refused("gelu") && is_gelu_forward(e)) || (refused("dgelu") && e == NF_CUBLASLT_EPILOGUE_DGELU) ||
      (refused("bgradb") && e == NF_CUBLASLT_EPILOGUE_BGRADB) || (refused("batched") && s.batch > 1) ||
      (refused("tf32") && d.compute == NF_CUBLAS_COMPUTE_32F_FAST_TF32) ||
      (refused("bf16") && d.compute == NF_CUBLAS_COMPUTE_32F_FAST_16BF) || refused("all"))
    return NF_CUBLAS_STATUS_NOT_SUPPORTED;
  return NF_CUBLAS_STATUS_SUCCESS;
}

// Rounds a float to `bits` explicit mantissa bits, to nearest, ties to even (NaN and inf kept).
float round_mantissa(float x, int bits) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) == 0x7f800000u) return x;
  const int drop = 23 - bits;
  const uint32_t half = (1u << (drop - 1)) - 1 + ((u >> drop) & 1u);
  u = (u + half) & ~((1u << drop) - 1);
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}
float round_input(float x, int compute) {
  if (compute == NF_CUBLAS_COMPUTE_32F_FAST_TF32) return round_mantissa(x, 10);
  if (compute == NF_CUBLAS_COMPUTE_32F_FAST_16BF) return round_mantissa(x, 7);
  return x;
}

// GELU's tanh form and its derivative (the form the cuBLASLt documentation gives).
double gelu(double x) {
  const double u = 0.7978845608028654 * (x + 0.044715 * x * x * x);
  return 0.5 * x * (1.0 + std::tanh(u));
}
double gelu_derivative(double x) {
  const double u = 0.7978845608028654 * (x + 0.044715 * x * x * x);
  const double t = std::tanh(u);
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * x * x);
}

// Element i of an array of `type` (CUDA_R_32F or CUDA_R_16BF) as a float, and a float stored there
// (bf16: the upper half of the float's bits, rounded to nearest even; NaN kept).
float get(const void* p, int type, int64_t i) {
  if (type == NF_CUDA_R_32F) return static_cast<const float*>(p)[i];
  const uint32_t u = uint32_t(static_cast<const uint16_t*>(p)[i]) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
void put(void* p, int type, int64_t i, float v) {
  if (type == NF_CUDA_R_32F) {
    static_cast<float*>(p)[i] = v;
    return;
  }
  uint32_t u;
  std::memcpy(&u, &v, 4);
  const uint16_t bits = (u & 0x7fffffffu) > 0x7f800000u ? uint16_t((u >> 16) | 0x40u)
                                                        : uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  static_cast<uint16_t*>(p)[i] = bits;
}
int elem_bytes(int type) { return type == NF_CUDA_R_16BF ? 2 : 4; }

uint32_t alignment_of(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p) | 256u;
  return uint32_t(a & (~a + 1));
}

}  // namespace

// ---- The marker the loader looks for -------------------------------------------------------------
NF_EXPORT const char* nf_cublaslt_standin(void) { return "nodeformer CPU stand-in for cuBLASLt"; }

// ---- Library and handle --------------------------------------------------------------------------
NF_EXPORT nf_cublasStatus_t cublasLtCreate(nf_cublasLtHandle_t* handle) {
  if (!handle) return NF_CUBLAS_STATUS_INVALID_VALUE;
  *handle = reinterpret_cast<nf_cublasLtHandle_t>(new (std::nothrow) Handle());
  return *handle ? NF_CUBLAS_STATUS_SUCCESS : NF_CUBLAS_STATUS_ALLOC_FAILED;
}
NF_EXPORT nf_cublasStatus_t cublasLtDestroy(nf_cublasLtHandle_t handle) {
  Handle* h = as<Handle>(handle, kHandleMagic);
  if (!h) return NF_CUBLAS_STATUS_NOT_INITIALIZED;
  h->magic = 0;
  delete h;
  return NF_CUBLAS_STATUS_SUCCESS;
}
NF_EXPORT size_t cublasLtGetVersion(void) { return 130000; }  // the API of cuBLASLt 13.0
NF_EXPORT const char* cublasLtGetStatusName(nf_cublasStatus_t s) {
  switch (s) {
    case NF_CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case NF_CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case NF_CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case NF_CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case NF_CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case NF_CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_UNKNOWN";
  }
}

// ---- Matmul descriptor ---------------------------------------------------------------------------
NF_EXPORT nf_cublasStatus_t cublasLtMatmulDescCreate(nf_cublasLtMatmulDesc_t* desc, int computeType, int scaleType) {
  if (!desc) return NF_CUBLAS_STATUS_INVALID_VALUE;
  Desc* d = new (std::nothrow) Desc();
  if (!d) return NF_CUBLAS_STATUS_ALLOC_FAILED;
  d->compute = computeType;
  d->scale = scaleType;
  *desc = reinterpret_cast<nf_cublasLtMatmulDesc_t>(d);
  return NF_CUBLAS_STATUS_SUCCESS;
}
NF_EXPORT nf_cublasStatus_t cublasLtMatmulDescDestroy(nf_cublasLtMatmulDesc_t desc) {
  Desc* d = as<Desc>(desc, kDescMagic);
  if (!d) return NF_CUBLAS_STATUS_INVALID_VALUE;
  d->magic = 0;
  delete d;
  return NF_CUBLAS_STATUS_SUCCESS;
}
NF_EXPORT nf_cublasStatus_t cublasLtMatmulDescSetAttribute(nf_cublasLtMatmulDesc_t desc, int attr, const void* buf,
                                                           size_t size) {
  Desc* d = as<Desc>(desc, kDescMagic);
  if (!d) return NF_CUBLAS_STATUS_INVALID_VALUE;
  bool ok = false;
  switch (attr) {
    case NF_CUBLASLT_MATMUL_DESC_COMPUTE_TYPE: ok = take(&d->compute, buf, size); break;
    case NF_CUBLASLT_MATMUL_DESC_SCALE_TYPE: ok = take(&d->scale, buf, size); break;
    case NF_CUBLASLT_MATMUL_DESC_POINTER_MODE: ok = take(&d->pointer_mode, buf, size); break;
    case NF_CUBLASLT_MATMUL_DESC_TRANSA: ok = take(&d->transa, buf, size) && (d->transa == 0 || d->transa == 1); break;
    case NF_CUBLASLT_MATMUL_DESC_TRANSB: ok = take(&d->transb, buf, size) && (d->transb == 0 || d->transb == 1); break;
    case NF_CUBLASLT_MATMUL_DESC_EPILOGUE: ok = take(&d->epilogue, buf, size); break;
    case NF_CUBLASLT_MATMUL_DESC_BIAS_POINTER: ok = take(&d->bias, buf, size); break;
    case NF_CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE: ok = take(&d->bias_stride, buf, size); break;
    case NF_CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: ok = take(&d->aux, buf, size); break;
    case NF_CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: ok = take(&d->aux_ld, buf, size); break;
    case NF_CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE: ok = take(&d->aux_stride, buf, size); break;
    case NF_CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
      ok = take(&d->bias_type, buf, size) && (d->bias_type == NF_CUDA_R_32F || d->bias_type == NF_CUDA_R_16BF);
      break;
    default: ok = false;  // an attribute the stand-in does not implement
  }
  return ok ? NF_CUBLAS_STATUS_SUCCESS : NF_CUBLAS_STATUS_INVALID_VALUE;
}

// ---- Matrix layouts ------------------------------------------------------------------------------
NF_EXPORT nf_cublasStatus_t cublasLtMatrixLayoutCreate(nf_cublasLtMatrixLayout_t* layout, int type, uint64_t rows,
                                                       uint64_t cols, int64_t ld) {
  if (!layout) return NF_CUBLAS_STATUS_INVALID_VALUE;
  Layout* l = new (std::nothrow) Layout();
  if (!l) return NF_CUBLAS_STATUS_ALLOC_FAILED;
  l->type = uint32_t(type), l->rows = rows, l->cols = cols, l->ld = ld;
  *layout = reinterpret_cast<nf_cublasLtMatrixLayout_t>(l);
  return NF_CUBLAS_STATUS_SUCCESS;
}
NF_EXPORT nf_cublasStatus_t cublasLtMatrixLayoutDestroy(nf_cublasLtMatrixLayout_t layout) {
  Layout* l = as<Layout>(layout, kLayoutMagic);
  if (!l) return NF_CUBLAS_STATUS_INVALID_VALUE;
  l->magic = 0;
  delete l;
  return NF_CUBLAS_STATUS_SUCCESS;
}
NF_EXPORT nf_cublasStatus_t cublasLtMatrixLayoutSetAttribute(nf_cublasLtMatrixLayout_t layout, int attr,
                                                             const void* buf, size_t size) {
  Layout* l = as<Layout>(layout, kLayoutMagic);
  if (!l) return NF_CUBLAS_STATUS_INVALID_VALUE;
  bool ok = false;
  switch (attr) {
    case NF_CUBLASLT_MATRIX_LAYOUT_TYPE: ok = take(&l->type, buf, size); break;
    case NF_CUBLASLT_MATRIX_LAYOUT_ORDER: ok = take(&l->order, buf, size); break;
    case NF_CUBLASLT_MATRIX_LAYOUT_ROWS: ok = take(&l->rows, buf, size); break;
    case NF_CUBLASLT_MATRIX_LAYOUT_COLS: ok = take(&l->cols, buf, size); break;
    case NF_CUBLASLT_MATRIX_LAYOUT_LD: ok = take(&l->ld, buf, size); break;
    case NF_CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: ok = take(&l->batch, buf, size); break;
    case NF_CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: ok = take(&l->stride, buf, size) && l->stride >= 0; break;
    default: ok = false;
  }
  return ok ? NF_CUBLAS_STATUS_SUCCESS : NF_CUBLAS_STATUS_INVALID_VALUE;
}

// ---- Heuristic preference ------------------------------------------------------------------------
NF_EXPORT nf_cublasStatus_t cublasLtMatmulPreferenceCreate(nf_cublasLtMatmulPreference_t* pref) {
  if (!pref) return NF_CUBLAS_STATUS_INVALID_VALUE;
  Pref* p = new (std::nothrow) Pref();
  if (!p) return NF_CUBLAS_STATUS_ALLOC_FAILED;
  *pref = reinterpret_cast<nf_cublasLtMatmulPreference_t>(p);
  return NF_CUBLAS_STATUS_SUCCESS;
}
NF_EXPORT nf_cublasStatus_t cublasLtMatmulPreferenceDestroy(nf_cublasLtMatmulPreference_t pref) {
  Pref* p = as<Pref>(pref, kPrefMagic);
  if (!p) return NF_CUBLAS_STATUS_INVALID_VALUE;
  p->magic = 0;
  delete p;
  return NF_CUBLAS_STATUS_SUCCESS;
}
NF_EXPORT nf_cublasStatus_t cublasLtMatmulPreferenceSetAttribute(nf_cublasLtMatmulPreference_t pref, int attr,
                                                                 const void* buf, size_t size) {
  Pref* p = as<Pref>(pref, kPrefMagic);
  if (!p) return NF_CUBLAS_STATUS_INVALID_VALUE;
  bool ok = false;
  switch (attr) {
    case NF_CUBLASLT_MATMUL_PREF_SEARCH_MODE: ok = take(&p->search, buf, size); break;
    case NF_CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: ok = take(&p->max_workspace, buf, size); break;
    case NF_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
    case NF_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    case NF_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
    case NF_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
      ok = take(&p->align[attr - NF_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES], buf, size);
      break;
    default: ok = false;
  }
  return ok ? NF_CUBLAS_STATUS_SUCCESS : NF_CUBLAS_STATUS_INVALID_VALUE;
}

// ---- The heuristic -------------------------------------------------------------------------------
// One algorithm, recorded as what it was chosen for: cublasLtMatmul refuses it for anything else.
NF_EXPORT nf_cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    nf_cublasLtHandle_t handle, nf_cublasLtMatmulDesc_t desc, nf_cublasLtMatrixLayout_t Adesc,
    nf_cublasLtMatrixLayout_t Bdesc, nf_cublasLtMatrixLayout_t Cdesc, nf_cublasLtMatrixLayout_t Ddesc,
    nf_cublasLtMatmulPreference_t preference, int requested, nf_cublasLtMatmulHeuristicResult_t results[],
    int* returned) {
  const Desc* d = as<Desc>(desc, kDescMagic);
  const Layout *a = as<Layout>(Adesc, kLayoutMagic), *b = as<Layout>(Bdesc, kLayoutMagic),
               *c = as<Layout>(Cdesc, kLayoutMagic), *dd = as<Layout>(Ddesc, kLayoutMagic);
  const Pref* p = as<Pref>(preference, kPrefMagic);
  if (!as<Handle>(handle, kHandleMagic)) return NF_CUBLAS_STATUS_NOT_INITIALIZED;
  if (!d || !a || !b || !c || !dd || !p || requested <= 0 || !results || !returned) return NF_CUBLAS_STATUS_INVALID_VALUE;
  *returned = 0;
  Shape s;
  nf_cublasStatus_t st = shape_of(*d, *a, *b, *c, *dd, &s);
  if (st != NF_CUBLAS_STATUS_SUCCESS) return st;
  st = supported(*d, s, *p);
  if (st != NF_CUBLAS_STATUS_SUCCESS) return st;
  nf_cublasLtMatmulHeuristicResult_t& r = results[0];
  std::memset(&r, 0, sizeof r);
  r.algo.data[0] = kAlgoMagic;
  r.algo.data[1] = d->epilogue;
  r.algo.data[2] = uint64_t(d->compute);
  r.algo.data[3] = uint64_t(s.m), r.algo.data[4] = uint64_t(s.n), r.algo.data[5] = uint64_t(s.k);
  r.algo.data[6] = uint64_t(p->align[0]) | uint64_t(p->align[1]) << 16 | uint64_t(p->align[2]) << 32 |
                   uint64_t(p->align[3]) << 48;
  r.algo.data[7] = uint64_t(s.batch);
  r.workspaceSize = workspace_for(*d, s);
  r.state = NF_CUBLAS_STATUS_SUCCESS;
  r.wavesCount = 1.0f;
  *returned = 1;
  return NF_CUBLAS_STATUS_SUCCESS;
}

// ---- The product ---------------------------------------------------------------------------------
NF_EXPORT nf_cublasStatus_t cublasLtMatmul(nf_cublasLtHandle_t handle, nf_cublasLtMatmulDesc_t desc,
                                           const void* alpha_p, const void* A_p, nf_cublasLtMatrixLayout_t Adesc,
                                           const void* B_p, nf_cublasLtMatrixLayout_t Bdesc, const void* beta_p,
                                           const void* C_p, nf_cublasLtMatrixLayout_t Cdesc, void* D_p,
                                           nf_cublasLtMatrixLayout_t Ddesc, const nf_cublasLtMatmulAlgo_t* algo,
                                           void* workspace, size_t workspace_size, void* /*stream*/) {
  const Desc* d = as<Desc>(desc, kDescMagic);
  const Layout *la = as<Layout>(Adesc, kLayoutMagic), *lb = as<Layout>(Bdesc, kLayoutMagic),
               *lc = as<Layout>(Cdesc, kLayoutMagic), *ld = as<Layout>(Ddesc, kLayoutMagic);
  if (!as<Handle>(handle, kHandleMagic)) return NF_CUBLAS_STATUS_NOT_INITIALIZED;
  if (!d || !la || !lb || !lc || !ld || !alpha_p || !beta_p || !algo) return NF_CUBLAS_STATUS_INVALID_VALUE;
  Shape s;
  nf_cublasStatus_t st = shape_of(*d, *la, *lb, *lc, *ld, &s);
  if (st != NF_CUBLAS_STATUS_SUCCESS) return st;
  // The algorithm must be the heuristic's for this configuration.
  if (algo->data[0] != kAlgoMagic || algo->data[1] != d->epilogue || algo->data[2] != uint64_t(d->compute) ||
      algo->data[3] != uint64_t(s.m) || algo->data[4] != uint64_t(s.n) || algo->data[5] != uint64_t(s.k) ||
      algo->data[7] != uint64_t(s.batch))
    return NF_CUBLAS_STATUS_INVALID_VALUE;
  const float alpha = *static_cast<const float*>(alpha_p), beta = *static_cast<const float*>(beta_p);
  const int ta = int(la->type), tc = int(ld->type);  // (the bias is D's type: supported)
  const char* A = static_cast<const char*>(A_p);
  const char* B = static_cast<const char*>(B_p);
  const char* C = static_cast<const char*>(C_p);
  char* D = static_cast<char*>(D_p);
  // The operands must be as aligned as the preference promised (a real kernel would fault or
  // read wrong data otherwise), every batch entry included.
  const void* operands[4] = {A, B, beta != 0.0f ? static_cast<const void*>(C) : static_cast<const void*>(D), D};
  const int64_t strides[4] = {la->stride, lb->stride, lc->stride, ld->stride};
  const int types[4] = {ta, ta, tc, tc};
  for (int i = 0; i < 4; ++i) {
    const uint32_t promised = uint32_t(algo->data[6] >> (16 * i)) & 0xffffu;
    uint32_t have = alignment_of(operands[i]);
    if (s.batch > 1 && strides[i] != 0) {
      const uint32_t sa = alignment_of(reinterpret_cast<const void*>(uintptr_t(strides[i]) * elem_bytes(types[i])));
      have = have < sa ? have : sa;
    }
    if (have < promised) return NF_CUBLAS_STATUS_INVALID_VALUE;
  }
  if (!A || !B || !D || (beta != 0.0f && !C)) return NF_CUBLAS_STATUS_INVALID_VALUE;
  if (lc->ld != ld->ld || lc->stride != ld->stride) return NF_CUBLAS_STATUS_NOT_SUPPORTED;  // C = D's layout (ours)
  Pref any;
  any.max_workspace = workspace_size;
  for (uint32_t& a : any.align) a = 2;
  st = supported(*d, s, any);
  if (st != NF_CUBLAS_STATUS_SUCCESS) return st;
  const size_t need = workspace_for(*d, s);
  if (need > 0 && (!workspace || workspace_size < need)) return NF_CUBLAS_STATUS_INVALID_VALUE;
  if (need > 0) std::memset(workspace, 0xff, need);  // scratch: what it held before is not used

  const uint32_t e = d->epilogue;
  const void* bias = d->bias;
  void* aux = const_cast<void*>(d->aux);
  const int64_t m = s.m, n = s.n, k = s.k;
  const int64_t ea = elem_bytes(ta), ec = elem_bytes(tc);
  auto opA = [&](const char* a, int64_t i, int64_t p) { return get(a, ta, d->transa ? p + i * la->ld : i + p * la->ld); };
  auto opB = [&](const char* b, int64_t p, int64_t j) { return get(b, ta, d->transb ? j + p * lb->ld : p + j * lb->ld); };
  for (int64_t z = 0; z < s.batch; ++z) {
    const char* Az = A + z * la->stride * ea;
    const char* Bz = B + z * lb->stride * ea;
    const char* Cz = beta != 0.0f ? C + z * lc->stride * ec : nullptr;
    char* Dz = D + z * ld->stride * ec;
    char* auxz = aux ? static_cast<char*>(aux) + z * d->aux_stride * ec : nullptr;
    if (e == NF_CUBLASLT_EPILOGUE_BGRADB) {  // bias gradient: Σ_k op(B)[k, j], partials in the workspace
      double* partial = static_cast<double*>(workspace);
      for (int64_t j = 0; j < n; ++j) {
        partial[j] = 0.0;
        for (int64_t p = 0; p < k; ++p) partial[j] += double(opB(Bz, p, j));
      }
      for (int64_t j = 0; j < n; ++j) put(const_cast<void*>(bias), tc, z * d->bias_stride + j, float(partial[j]));
    }
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < m; ++i) {
        double acc = 0.0;
        for (int64_t p = 0; p < k; ++p)
          acc += double(round_input(opA(Az, i, p), d->compute)) * double(round_input(opB(Bz, p, j), d->compute));
        double v = double(alpha) * acc;
        if (Cz) v += double(beta) * double(get(Cz, tc, i + j * lc->ld));
        if (adds_bias(e)) v += double(get(bias, tc, i + z * d->bias_stride));
        if (writes_aux(e)) {  // a bf16 aux holds the value rounded, and the activation takes that
          put(auxz, tc, i + j * d->aux_ld, float(v));
          if (tc == NF_CUDA_R_16BF) v = double(get(auxz, tc, i + j * d->aux_ld));
        }
        if (has(e, NF_CUBLASLT_EPILOGUE_RELU) && e != NF_CUBLASLT_EPILOGUE_DGELU) v = v > 0.0 ? v : 0.0;
        if (is_gelu_forward(e)) v = gelu(v);
        if (e == NF_CUBLASLT_EPILOGUE_DGELU) v *= gelu_derivative(double(get(auxz, tc, i + j * d->aux_ld)));
        put(Dz, tc, i + j * ld->ld, float(v));
      }
  }
  return NF_CUBLAS_STATUS_SUCCESS;
}
