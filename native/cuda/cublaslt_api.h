// The slice of NVIDIA's cuBLASLt C API that nodeformer calls, declared here so the backend builds
// (and its addon loads) without the cuBLAS headers or library: the library is opened at run time
// (cublaslt.h) and these entry points are looked up by name. Types are the ABI's: every handle and
// descriptor is a pointer, every enum an int-sized value, cudaStream_t a pointer.
//
// Where each value comes from (quoted, not guessed):
//   - cublasLt.h of cuBLAS 13.4 as vendored in github.com/wesleyrparsons/WesChat12 (cublasLt.h,
//     commit d59e953115cd741c5f60a670ed3251f9c73c0d1f): the prototypes of cublasLtCreate,
//     cublasLtGetVersion, cublasLtMatmul, cublasLtMatmulDescCreate/Destroy/SetAttribute,
//     cublasLtMatrixLayoutCreate/Destroy/SetAttribute, cublasLtMatmulPreferenceCreate/Destroy/
//     SetAttribute, cublasLtMatmulAlgoGetHeuristic; cublasLtMatmulAlgo_t (uint64_t data[8]);
//     cublasLtMatmulHeuristicResult_t; the enums cublasLtMatmulDescAttributes_t,
//     cublasLtMatrixLayoutAttribute_t, cublasLtMatmulPreferenceAttributes_t, cublasLtEpilogue_t.
//   - cublas_api.h of the same release, same repository and commit: cublasStatus_t,
//     cublasOperation_t, cublasComputeType_t.
//   - library_types.h of the CUDA 13.0 toolkit (/usr/local/cuda-13.0/include, lines 57-63 here):
//     cudaDataType_t's CUDA_R_32F = 0, CUDA_R_16BF = 14.
//   - The cuBLAS documentation, docs.nvidia.com/cuda/cublas, sections "cublasLtMatmul()",
//     "cublasLtEpilogue_t", "cublasLtMatmulDescAttributes_t" (the semantics: D = alpha op(A) op(B) +
//     beta C, column-major; bias length = rows of D; CUBLASLT_EPILOGUE_GELU is the tanh form
//     0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))); BGRADB reduces op(B) over k, one value per
//     column of D; the GELU aux buffer's leading dimension must be divisible by 8).
// These values have been stable from cuBLAS 11.x through 13.x for everything declared here (the
// library is accepted as libcublasLt.so.13 or .so.12).
// Attribute value types, as the header documents them (cublasLt*SetAttribute checks the size):
//   TRANSA/TRANSB int32, EPILOGUE uint32, BIAS_POINTER / EPILOGUE_AUX_POINTER a pointer,
//   EPILOGUE_AUX_LD / EPILOGUE_AUX_BATCH_STRIDE / BIAS_BATCH_STRIDE int64; BIAS_DATA_TYPE int32
//   (the bias' cudaDataType_t, D's type unless set; the epilogue's aux buffer is D's type); layout
//   BATCH_COUNT int32, STRIDED_BATCH_OFFSET int64; preference MAX_WORKSPACE_BYTES uint64, MIN_ALIGNMENT_*
//   uint32.
// This header is also what the CPU stand-in (native/cuda/cublaslt_standin.cpp) implements.
#pragma once
#include <cstddef>
#include <cstdint>

extern "C" {

// ---- cublas_api.h ----
typedef int nf_cublasStatus_t;
enum : int {
  NF_CUBLAS_STATUS_SUCCESS = 0,
  NF_CUBLAS_STATUS_NOT_INITIALIZED = 1,
  NF_CUBLAS_STATUS_ALLOC_FAILED = 3,
  NF_CUBLAS_STATUS_INVALID_VALUE = 7,
  NF_CUBLAS_STATUS_ARCH_MISMATCH = 8,
  NF_CUBLAS_STATUS_MAPPING_ERROR = 11,
  NF_CUBLAS_STATUS_EXECUTION_FAILED = 13,
  NF_CUBLAS_STATUS_INTERNAL_ERROR = 14,
  NF_CUBLAS_STATUS_NOT_SUPPORTED = 15,
  NF_CUBLAS_STATUS_LICENSE_ERROR = 16,
};
enum : int32_t { NF_CUBLAS_OP_N = 0, NF_CUBLAS_OP_T = 1 };
enum : int {
  NF_CUBLAS_COMPUTE_32F = 68,            // float, exact fp32 multiply-add
  NF_CUBLAS_COMPUTE_32F_FAST_16BF = 75,  // float, inputs may be down-converted to bfloat16
  NF_CUBLAS_COMPUTE_32F_FAST_TF32 = 77,  // float, inputs may be down-converted to TF32
};

// ---- library_types.h ----
enum : int { NF_CUDA_R_32F = 0, NF_CUDA_R_16BF = 14 };

// ---- cublasLt.h ----
struct nf_cublasLtContext;
struct nf_cublasLtMatmulDescOpaque;
struct nf_cublasLtMatrixLayoutOpaque;
struct nf_cublasLtMatmulPreferenceOpaque;
typedef nf_cublasLtContext* nf_cublasLtHandle_t;
typedef nf_cublasLtMatmulDescOpaque* nf_cublasLtMatmulDesc_t;
typedef nf_cublasLtMatrixLayoutOpaque* nf_cublasLtMatrixLayout_t;
typedef nf_cublasLtMatmulPreferenceOpaque* nf_cublasLtMatmulPreference_t;

typedef struct {
  uint64_t data[8];
} nf_cublasLtMatmulAlgo_t;

typedef struct {
  nf_cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;
  nf_cublasStatus_t state;
  float wavesCount;
  int reserved[4];
} nf_cublasLtMatmulHeuristicResult_t;

// cublasLtMatmulDescAttributes_t (the ones used).
enum : int {
  NF_CUBLASLT_MATMUL_DESC_COMPUTE_TYPE = 0,
  NF_CUBLASLT_MATMUL_DESC_SCALE_TYPE = 1,
  NF_CUBLASLT_MATMUL_DESC_POINTER_MODE = 2,
  NF_CUBLASLT_MATMUL_DESC_TRANSA = 3,
  NF_CUBLASLT_MATMUL_DESC_TRANSB = 4,
  NF_CUBLASLT_MATMUL_DESC_EPILOGUE = 7,
  NF_CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,
  NF_CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE = 10,
  NF_CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER = 11,
  NF_CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD = 12,
  NF_CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE = 13,
  NF_CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE = 26,  // int32 cudaDataType_t; default: D's type
};

// cublasLtMatrixLayoutAttribute_t (the ones used).
enum : int {
  NF_CUBLASLT_MATRIX_LAYOUT_TYPE = 0,
  NF_CUBLASLT_MATRIX_LAYOUT_ORDER = 1,
  NF_CUBLASLT_MATRIX_LAYOUT_ROWS = 2,
  NF_CUBLASLT_MATRIX_LAYOUT_COLS = 3,
  NF_CUBLASLT_MATRIX_LAYOUT_LD = 4,
  NF_CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5,
  NF_CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6,
};

// cublasLtMatmulPreferenceAttributes_t (the ones used).
enum : int {
  NF_CUBLASLT_MATMUL_PREF_SEARCH_MODE = 0,
  NF_CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,
  NF_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,
  NF_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
  NF_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
  NF_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8,
};

// cublasLtEpilogue_t.
enum : uint32_t {
  NF_CUBLASLT_EPILOGUE_DEFAULT = 1,
  NF_CUBLASLT_EPILOGUE_RELU = 2,
  NF_CUBLASLT_EPILOGUE_BIAS = 4,
  NF_CUBLASLT_EPILOGUE_RELU_BIAS = 2 | 4,
  NF_CUBLASLT_EPILOGUE_GELU = 32,
  NF_CUBLASLT_EPILOGUE_GELU_AUX = 32 | 128,
  NF_CUBLASLT_EPILOGUE_GELU_BIAS = 32 | 4,
  NF_CUBLASLT_EPILOGUE_GELU_AUX_BIAS = 32 | 128 | 4,
  NF_CUBLASLT_EPILOGUE_DGELU = 64 | 128,
  NF_CUBLASLT_EPILOGUE_DGELU_BGRAD = 64 | 128 | 16,
  NF_CUBLASLT_EPILOGUE_BGRADA = 256,
  NF_CUBLASLT_EPILOGUE_BGRADB = 512,
};

// The entry points (cublasLt.h prototypes), as function pointer types.
typedef nf_cublasStatus_t (*nf_cublasLtCreate_fn)(nf_cublasLtHandle_t* handle);
typedef size_t (*nf_cublasLtGetVersion_fn)(void);
typedef nf_cublasStatus_t (*nf_cublasLtMatmulDescCreate_fn)(nf_cublasLtMatmulDesc_t* desc, int computeType,
                                                            int scaleType);
typedef nf_cublasStatus_t (*nf_cublasLtMatmulDescDestroy_fn)(nf_cublasLtMatmulDesc_t desc);
typedef nf_cublasStatus_t (*nf_cublasLtMatmulDescSetAttribute_fn)(nf_cublasLtMatmulDesc_t desc, int attr,
                                                                  const void* buf, size_t sizeInBytes);
typedef nf_cublasStatus_t (*nf_cublasLtMatrixLayoutCreate_fn)(nf_cublasLtMatrixLayout_t* layout, int type,
                                                              uint64_t rows, uint64_t cols, int64_t ld);
typedef nf_cublasStatus_t (*nf_cublasLtMatrixLayoutDestroy_fn)(nf_cublasLtMatrixLayout_t layout);
typedef nf_cublasStatus_t (*nf_cublasLtMatrixLayoutSetAttribute_fn)(nf_cublasLtMatrixLayout_t layout, int attr,
                                                                    const void* buf, size_t sizeInBytes);
typedef nf_cublasStatus_t (*nf_cublasLtMatmulPreferenceCreate_fn)(nf_cublasLtMatmulPreference_t* pref);
typedef nf_cublasStatus_t (*nf_cublasLtMatmulPreferenceDestroy_fn)(nf_cublasLtMatmulPreference_t pref);
typedef nf_cublasStatus_t (*nf_cublasLtMatmulPreferenceSetAttribute_fn)(nf_cublasLtMatmulPreference_t pref, int attr,
                                                                        const void* buf, size_t sizeInBytes);
typedef nf_cublasStatus_t (*nf_cublasLtMatmulAlgoGetHeuristic_fn)(
    nf_cublasLtHandle_t handle, nf_cublasLtMatmulDesc_t desc, nf_cublasLtMatrixLayout_t Adesc,
    nf_cublasLtMatrixLayout_t Bdesc, nf_cublasLtMatrixLayout_t Cdesc, nf_cublasLtMatrixLayout_t Ddesc,
    nf_cublasLtMatmulPreference_t preference, int requestedAlgoCount,
    nf_cublasLtMatmulHeuristicResult_t heuristicResultsArray[], int* returnAlgoCount);
typedef nf_cublasStatus_t (*nf_cublasLtMatmul_fn)(nf_cublasLtHandle_t handle, nf_cublasLtMatmulDesc_t desc,
                                                  const void* alpha, const void* A, nf_cublasLtMatrixLayout_t Adesc,
                                                  const void* B, nf_cublasLtMatrixLayout_t Bdesc, const void* beta,
                                                  const void* C, nf_cublasLtMatrixLayout_t Cdesc, void* D,
                                                  nf_cublasLtMatrixLayout_t Ddesc, const nf_cublasLtMatmulAlgo_t* algo,
                                                  void* workspace, size_t workspaceSizeInBytes, void* stream);
typedef const char* (*nf_cublasLtGetStatusName_fn)(nf_cublasStatus_t status);

// Exported only by nodeformer's CPU stand-in (native/cuda/cublaslt_standin.cpp): how the loader
// tells it from the real library (the GPU build refuses it, the emulated build accepts nothing else).
typedef const char* (*nf_cublaslt_standin_fn)(void);

}  // extern "C"

static_assert(sizeof(nf_cublasLtMatmulAlgo_t) == 64, "cublasLtMatmulAlgo_t is uint64_t data[8]");
static_assert(sizeof(nf_cublasLtMatmulHeuristicResult_t) == 96, "cublasLtMatmulHeuristicResult_t layout");
