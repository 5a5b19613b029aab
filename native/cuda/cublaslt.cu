// cuBLASLt loaded at run time (see cublaslt.h): the loader, the process's handle and workspace, the
// algorithm cache, and one product through cublasLtMatmul. No cuBLAS header is needed: the entry
// points and enum values are declared in cublaslt_api.h (with where each comes from).
// A product's descriptors follow the cuBLASLt documentation's recipe (llm.c's matmul_cublaslt is
// the same): cublasLtMatmulDescCreate(compute type, CUDA_R_32F scale), TRANSA/TRANSB, EPILOGUE and
// its pointers; one cublasLtMatrixLayout per operand (CUDA_R_32F or CUDA_R_16BF, column-major rows x cols with
// ld, plus BATCH_COUNT and STRIDED_BATCH_OFFSET when batched); a preference capping the workspace
// at ours and stating the operands' real alignments (the default assumes 256-byte alignment, which
// sub-matrix pointers such as a fused QKV weight's K block need not have); one algorithm from
// cublasLtMatmulAlgoGetHeuristic, cached; then cublasLtMatmul on the backend's stream.
#include "cublaslt.h"

#include <dlfcn.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "common.cuh"
#include "cublaslt_api.h"
#include "device.h"

namespace nf::cuda::lt {

namespace {

#if defined(__CUDACC__)
constexpr bool kEmulated = false;
constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // what Hopper's fastest kernels ask for (llm.c, PyTorch)
#else
constexpr bool kEmulated = true;
constexpr size_t kWorkspaceBytes = size_t{1} << 20;
#endif
constexpr int64_t kMinMajor = 12;  // cuBLASLt 12.0 or newer

struct Api {
  nf_cublasLtCreate_fn Create = nullptr;
  nf_cublasLtGetVersion_fn GetVersion = nullptr;
  nf_cublasLtMatmulDescCreate_fn MatmulDescCreate = nullptr;
  nf_cublasLtMatmulDescDestroy_fn MatmulDescDestroy = nullptr;
  nf_cublasLtMatmulDescSetAttribute_fn MatmulDescSetAttribute = nullptr;
  nf_cublasLtMatrixLayoutCreate_fn MatrixLayoutCreate = nullptr;
  nf_cublasLtMatrixLayoutDestroy_fn MatrixLayoutDestroy = nullptr;
  nf_cublasLtMatrixLayoutSetAttribute_fn MatrixLayoutSetAttribute = nullptr;
  nf_cublasLtMatmulPreferenceCreate_fn MatmulPreferenceCreate = nullptr;
  nf_cublasLtMatmulPreferenceDestroy_fn MatmulPreferenceDestroy = nullptr;
  nf_cublasLtMatmulPreferenceSetAttribute_fn MatmulPreferenceSetAttribute = nullptr;
  nf_cublasLtMatmulAlgoGetHeuristic_fn MatmulAlgoGetHeuristic = nullptr;
  nf_cublasLtMatmul_fn Matmul = nullptr;
  nf_cublasLtGetStatusName_fn GetStatusName = nullptr;  // optional
};

// What a cached algorithm was chosen for: everything the heuristic sees but the pointers' values.
using Key = std::array<int64_t, 24>;
struct KeyHash {
  size_t operator()(const Key& k) const {
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the fields
    for (int64_t v : k) h = (h ^ uint64_t(v)) * 1099511628211ull;
    return size_t(h);
  }
};
struct Algo {
  bool found = false;
  nf_cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;
};

struct Library {
  std::once_flag once;
  Api api;
  bool loaded = false, stand_in = false;
  std::string path, reason;
  int64_t version = 0;

  std::mutex mutex;  // the handle, the workspace, the cache
  nf_cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  std::unordered_map<Key, Algo, KeyHash> cache;

  std::atomic<int64_t> matmuls{0}, fused{0}, tf32{0}, bf16{0}, queries{0}, unsupported{0};
};

// Never destroyed (products may run from finalizers during teardown).
Library& lib() {
  static Library* l = new Library();
  return *l;
}

bool disabled_by_env() {
  const char* v = std::getenv("NF_CUBLASLT");
  return v && (!std::strcmp(v, "0") || !std::strcmp(v, "off") || !std::strcmp(v, "false"));
}

// The files to try, in order.
std::vector<std::string> candidates() {
  const char* env = std::getenv("NF_CUBLASLT_PATH");
  if (env && *env) return {env};
  std::vector<std::string> c;
  if (kEmulated) return c;
  c = {"libcublasLt.so.13", "libcublasLt.so.12"};
  std::vector<std::string> dirs;
#if defined(__CUDACC__)
  Dl_info where{};  // the CUDA runtime's own folder: the toolkit's cuBLASLt sits beside it
  if (dladdr(reinterpret_cast<void*>(&cudaGetDeviceCount), &where) && where.dli_fname) {
    const std::string file = where.dli_fname;
    const size_t slash = file.rfind('/');
    if (slash != std::string::npos) dirs.push_back(file.substr(0, slash));
  }
#endif
  if (const char* cuda_path = std::getenv("CUDA_PATH"); cuda_path && *cuda_path) dirs.push_back(std::string(cuda_path) + "/lib64");
  dirs.push_back("/usr/local/cuda/lib64");
  for (const std::string& d : dirs)
    if (!d.empty())
      for (const char* so : {"libcublasLt.so.13", "libcublasLt.so.12"}) c.push_back(d + "/" + so);
  c.push_back("libcublasLt.so");
  return c;
}

// Opens one candidate; on success fills L and returns "", else says why not.
std::string try_open(Library& L, const std::string& file) {
  void* h = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    return e ? e : "dlopen failed";
  }
  const auto stand_in = reinterpret_cast<nf_cublaslt_standin_fn>(dlsym(h, "nf_cublaslt_standin"));
  auto reject = [&](const std::string& why) {
    dlclose(h);
    return file + ": " + why;
  };
  if (stand_in && !kEmulated) return reject("is nodeformer's CPU stand-in, which only the emulated build can use");
  if (!stand_in && kEmulated)
    return reject("is not nodeformer's CPU stand-in (the emulated build's device pointers are host memory)");
  Api a;
  const char* missing = nullptr;
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
    if (!fn && !missing) missing = name;
  };
  sym(a.Create, "cublasLtCreate");
  sym(a.GetVersion, "cublasLtGetVersion");
  sym(a.MatmulDescCreate, "cublasLtMatmulDescCreate");
  sym(a.MatmulDescDestroy, "cublasLtMatmulDescDestroy");
  sym(a.MatmulDescSetAttribute, "cublasLtMatmulDescSetAttribute");
  sym(a.MatrixLayoutCreate, "cublasLtMatrixLayoutCreate");
  sym(a.MatrixLayoutDestroy, "cublasLtMatrixLayoutDestroy");
  sym(a.MatrixLayoutSetAttribute, "cublasLtMatrixLayoutSetAttribute");
  sym(a.MatmulPreferenceCreate, "cublasLtMatmulPreferenceCreate");
  sym(a.MatmulPreferenceDestroy, "cublasLtMatmulPreferenceDestroy");
  sym(a.MatmulPreferenceSetAttribute, "cublasLtMatmulPreferenceSetAttribute");
  sym(a.MatmulAlgoGetHeuristic, "cublasLtMatmulAlgoGetHeuristic");
  sym(a.Matmul, "cublasLtMatmul");
  if (missing) return reject(std::string("has no ") + missing);
  a.GetStatusName = reinterpret_cast<nf_cublasLtGetStatusName_fn>(dlsym(h, "cublasLtGetStatusName"));
  const int64_t version = int64_t(a.GetVersion());
  // major·10000 + minor·100 + patch since cuBLAS 12 (cublas_api.h's CUBLAS_VERSION); major·1000 + ... before.
  const int64_t major = version >= 100000 ? version / 10000 : version / 1000;
  if (major < kMinMajor) return reject("is cuBLASLt " + std::to_string(version) + ", older than 12.0");
  L.api = a;
  L.loaded = true;
  L.stand_in = stand_in != nullptr;
  L.path = file;
  L.version = version;
  return "";
}

void load(Library& L) {
  std::call_once(L.once, [&L] {
    if (disabled_by_env()) {
      L.reason = "disabled by NF_CUBLASLT=0";
      return;
    }
    std::string tried, last;
    for (const std::string& file : candidates()) {
      last = try_open(L, file);
      if (last.empty()) return;
      tried += (tried.empty() ? "" : ", ") + file;
    }
    if (kEmulated) {
      L.reason = tried.empty() ? "NF_CUBLASLT_PATH is not set" : last;
      std::fprintf(stderr,
                   "nodeformer: cuBLASLt is not loaded (%s): matrix products run on nodeformer's own CUDA kernel. "
                   "The emulated build takes only its CPU stand-in, NF_CUBLASLT_PATH=build/cuda-emu/emulated/"
                   "libnf_cublaslt_standin.so; on a GPU, install the CUDA toolkit (cuBLAS) or `pip install "
                   "nvidia-cublas`.\n",
                   L.reason.c_str());
    } else {
      L.reason = "tried " + tried + (last.empty() ? "" : "; last: " + last);
      std::fprintf(stderr,
                   "nodeformer: cuBLASLt not found (%s): CUDA matrix products run on nodeformer's own fp32 kernel, "
                   "several times slower. Install the CUDA toolkit's cuBLAS (libcublasLt.so.13 on the library path, "
                   "e.g. LD_LIBRARY_PATH=/usr/local/cuda/lib64), or `pip install nvidia-cublas` and set "
                   "NF_CUBLASLT_PATH to its nvidia/cublas/lib/libcublasLt.so.13. NF_CUBLASLT=0 silences this.\n",
                   L.reason.c_str());
    }
    std::fflush(stderr);
  });
}

std::string status_text(const Library& L, nf_cublasStatus_t s) {
  const char* name = L.api.GetStatusName ? L.api.GetStatusName(s) : nullptr;
  return std::string(name ? name : "CUBLAS_STATUS") + " (" + std::to_string(s) + ")";
}

// The handle and workspace, created on the first product.
Status ensure_handle(Library& L) {
  std::lock_guard<std::mutex> lock(L.mutex);
  if (L.handle) return Status::Ok();
  cudaStream_t s;
  NF_TRY(backend_stream(&s));  // the device's context exists before the handle
  nf_cublasLtHandle_t h = nullptr;
  const nf_cublasStatus_t st = L.api.Create(&h);
  NF_CHECK(st == NF_CUBLAS_STATUS_SUCCESS && h, "gemm", "cublasLtCreate failed: " + status_text(L, st));
  void* ws = nullptr;
  NF_TRY(cached_alloc(&ws, kWorkspaceBytes));
  L.workspace = ws;
  L.workspace_bytes = kWorkspaceBytes;
  L.handle = h;
  return Status::Ok();
}

// The largest power of two (up to 256) dividing the operand's address and, when batched, its batch
// stride in bytes: what every entry of the batch is aligned to.
uint32_t alignment(const void* p, int64_t stride, int64_t batch, int type) {
  uint64_t bits = uint64_t(reinterpret_cast<uintptr_t>(p)) | 256u;
  if (batch > 1 && stride != 0) bits |= uint64_t(stride) * (type == NF_CUDA_R_16BF ? 2u : 4u);
  return uint32_t(bits & (~bits + 1));
}

// The descriptors of one product; destroyed with it.
struct Descriptors {
  const Api& api;
  nf_cublasLtMatmulDesc_t desc = nullptr;
  nf_cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  nf_cublasLtMatmulPreference_t pref = nullptr;
  explicit Descriptors(const Api& api_) : api(api_) {}
  ~Descriptors() {
    if (pref) api.MatmulPreferenceDestroy(pref);
    for (auto* l : {a, b, c, d})
      if (l) api.MatrixLayoutDestroy(l);
    if (desc) api.MatmulDescDestroy(desc);
  }
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;
};

// Builds them; the name of the failing call (the library refused a value: no algorithm then).
const char* describe(const Library& L, const Product& p, Descriptors* x) {
  const Api& api = L.api;
  if (api.MatmulDescCreate(&x->desc, p.compute, NF_CUDA_R_32F)) return "cublasLtMatmulDescCreate";
  const int32_t ta = p.transa ? NF_CUBLAS_OP_T : NF_CUBLAS_OP_N, tb = p.transb ? NF_CUBLAS_OP_T : NF_CUBLAS_OP_N;
  const uint32_t epilogue = p.epilogue;
  auto set = [&](int attr, const void* v, size_t n) { return api.MatmulDescSetAttribute(x->desc, attr, v, n) == 0; };
  if (!set(NF_CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta) || !set(NF_CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb) ||
      !set(NF_CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue))
    return "cublasLtMatmulDescSetAttribute";
  const void* bias = p.bias_grad ? static_cast<const void*>(p.bias_grad) : static_cast<const void*>(p.bias);
  if (bias && !set(NF_CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias)) return "cublasLtMatmulDescSetAttribute(BIAS_POINTER)";
  if (p.aux) {
    const void* aux = p.aux;
    const int64_t ld = p.aux_ld, stride = p.aux_stride;
    if (!set(NF_CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux) ||
        !set(NF_CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld) ||
        (p.batch > 1 && !set(NF_CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, &stride, sizeof stride)))
      return "cublasLtMatmulDescSetAttribute(EPILOGUE_AUX)";
  }
  auto layout = [&](nf_cublasLtMatrixLayout_t* l, int type, int64_t rows, int64_t cols, int64_t ld, int64_t stride) {
    if (api.MatrixLayoutCreate(l, type, uint64_t(rows), uint64_t(cols), ld)) return false;
    if (p.batch == 1) return true;
    const int32_t count = int32_t(p.batch);
    return api.MatrixLayoutSetAttribute(*l, NF_CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count) == 0 &&
           api.MatrixLayoutSetAttribute(*l, NF_CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride) == 0;
  };
  if (!layout(&x->a, p.a_type, p.transa ? p.k : p.m, p.transa ? p.m : p.k, p.lda, p.strideA) ||
      !layout(&x->b, p.a_type, p.transb ? p.n : p.k, p.transb ? p.k : p.n, p.ldb, p.strideB) ||
      !layout(&x->c, p.c_type, p.m, p.n, p.ldc, p.strideC) || !layout(&x->d, p.c_type, p.m, p.n, p.ldc, p.strideC))
    return "cublasLtMatrixLayoutCreate";
  if (api.MatmulPreferenceCreate(&x->pref)) return "cublasLtMatmulPreferenceCreate";
  const uint64_t ws = L.workspace_bytes;
  const uint32_t align[4] = {alignment(p.A, p.strideA, p.batch, p.a_type), alignment(p.B, p.strideB, p.batch, p.a_type),
                             alignment(p.beta != 0.0f ? p.C : p.D, p.strideC, p.batch, p.c_type),
                             alignment(p.D, p.strideC, p.batch, p.c_type)};
  const int attrs[4] = {NF_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, NF_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                        NF_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, NF_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  if (api.MatmulPreferenceSetAttribute(x->pref, NF_CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws))
    return "cublasLtMatmulPreferenceSetAttribute";
  for (int i = 0; i < 4; ++i)
    if (api.MatmulPreferenceSetAttribute(x->pref, attrs[i], &align[i], sizeof align[i]))
      return "cublasLtMatmulPreferenceSetAttribute";
  return nullptr;
}

Key key_of(const Product& p) {
  const void* bias = p.bias_grad ? static_cast<const void*>(p.bias_grad) : static_cast<const void*>(p.bias);
  return Key{p.m, p.n, p.k, p.batch, p.transa, p.transb, p.lda, p.strideA, p.ldb, p.strideB, p.ldc, p.strideC,
             p.beta != 0.0f, int64_t(p.epilogue), p.compute, p.aux_ld, p.aux_stride,
             alignment(p.A, p.strideA, p.batch, p.a_type), alignment(p.B, p.strideB, p.batch, p.a_type),
             alignment(p.beta != 0.0f ? p.C : p.D, p.strideC, p.batch, p.c_type),
             alignment(p.D, p.strideC, p.batch, p.c_type), bias ? alignment(bias, 0, 1, NF_CUDA_R_32F) : 0,
             p.aux ? alignment(p.aux, p.aux_stride, p.batch, p.c_type) : 0, p.a_type * 64 + p.c_type};
}

}  // namespace

Status matmul(const Product& p, bool* ran) {
  *ran = false;
  Library& L = lib();
  load(L);
  if (!L.loaded) return Status::Ok();
  NF_TRY(ensure_handle(L));
  // (Shared: a capture in the emulated build keeps them for the recorded product, below.)
  const auto xp = std::make_shared<Descriptors>(L.api);
  Descriptors& x = *xp;
  if (describe(L, p, &x)) {  // a value this library does not take: no algorithm for it
    ++L.unsupported;
    return Status::Ok();
  }
  const Key key = key_of(p);
  Algo algo;
  bool cached = false;
  {
    std::lock_guard<std::mutex> lock(L.mutex);
    auto it = L.cache.find(key);
    if (it != L.cache.end()) algo = it->second, cached = true;
  }
  if (!cached) {
    nf_cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    ++L.queries;
    const nf_cublasStatus_t st =
        L.api.MatmulAlgoGetHeuristic(L.handle, x.desc, x.a, x.b, x.c, x.d, x.pref, 1, &result, &found);
    algo.found = st == NF_CUBLAS_STATUS_SUCCESS && found > 0 && result.state == NF_CUBLAS_STATUS_SUCCESS &&
                 result.workspaceSize <= L.workspace_bytes;
    algo.algo = result.algo;
    algo.workspace = result.workspaceSize;
    std::lock_guard<std::mutex> lock(L.mutex);
    L.cache.emplace(key, algo);
  }
  if (!algo.found) {
    ++L.unsupported;
    return Status::Ok();
  }
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  const float alpha = p.alpha, beta = p.beta;
  const void *A = p.A, *B = p.B, *C = p.beta != 0.0f ? p.C : p.D;
  void* D = p.D;
  auto call = [&L, xp, alpha, beta, A, B, C, D, algo, s] {
    return L.api.Matmul(L.handle, xp->desc, &alpha, A, xp->a, B, xp->b, &beta, C, xp->c, D, xp->d, &algo.algo,
                        L.workspace, L.workspace_bytes, static_cast<void*>(s));
  };
#if defined(__CUDACC__)
  const nf_cublasStatus_t st = call();
#else
  // The stand-in computes when called: on a capturing stream the call itself is the recorded node.
  nf_cublasStatus_t st = NF_CUBLAS_STATUS_SUCCESS;
  if (nf::emu::detail::capturing(s))
    NF_CUDA_TRY("gemm", nf::emu::record_or_run(s, [call] {
      return call() == NF_CUBLAS_STATUS_SUCCESS ? cudaSuccess : cudaErrorLaunchFailure;
    }));
  else
    st = call();
#endif
  NF_CHECK(st == NF_CUBLAS_STATUS_SUCCESS, "gemm",
           "cublasLtMatmul failed: " + status_text(L, st) + " (m=" + std::to_string(p.m) + ", n=" + std::to_string(p.n) +
               ", k=" + std::to_string(p.k) + ", batch=" + std::to_string(p.batch) + ", epilogue " +
               std::to_string(p.epilogue) + ")");
  ++L.matmuls;
  if (p.epilogue != NF_CUBLASLT_EPILOGUE_DEFAULT) ++L.fused;
  if (p.compute == NF_CUBLAS_COMPUTE_32F_FAST_TF32) ++L.tf32;
  if (p.compute == NF_CUBLAS_COMPUTE_32F_FAST_16BF || p.a_type == NF_CUDA_R_16BF) ++L.bf16;
  *ran = true;
  return Status::Ok();
}

bool available() {
  Library& L = lib();
  load(L);
  return L.loaded;
}

Info info() {
  Library& L = lib();
  load(L);
  Info i;
  i.loaded = L.loaded;
  i.stand_in = L.stand_in;
  i.library = L.path;
  i.reason = L.reason;
  i.version = L.version;
  {
    std::lock_guard<std::mutex> lock(L.mutex);
    i.workspace_bytes = int64_t(L.workspace_bytes);
  }
  i.matmuls = L.matmuls;
  i.fused = L.fused;
  i.tf32 = L.tf32;
  i.bf16 = L.bf16;
  i.heuristic_queries = L.queries;
  i.unsupported = L.unsupported;
  return i;
}

}  // namespace nf::cuda::lt
