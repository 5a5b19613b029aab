// cuBLASLt, loaded at run time: the library, its one handle and workspace, and one matrix product
// in cuBLASLt's own (column-major) terms. gemm.cu's dispatch maps the project's row-major products
// onto it and falls back to its own kernel whenever this says it did not run.
//
// Loading (once per process, on the first product or info() call): the GPU build opens
// $NF_CUBLASLT_PATH when set, else libcublasLt.so.13, libcublasLt.so.12, the same two next to the
// loaded CUDA runtime, and libcublasLt.so; the emulated build opens only $NF_CUBLASLT_PATH, which
// must be nodeformer's CPU stand-in (native/cuda/cublaslt_standin.cpp: the same entry points
// computed on the CPU over the emulator's host-memory "device" pointers). The GPU build refuses the
// stand-in, the emulated build anything else. NF_CUBLASLT=0 disables the library (no warning).
// When no library loads, ONE warning goes to stderr saying what to install, and every product runs
// on the project's own kernel.
// The handle is created on the first product (one per process; products are queued on the
// backend's stream), and its workspace is one block of the caching allocator, kept for the process.
// Algorithms from cublasLtMatmulAlgoGetHeuristic are cached per product description (shape,
// transposes, leading dimensions, batch strides, epilogue, compute type and operand alignments).
#pragma once
#include <cstdint>
#include <string>

#include "../core/status.h"

namespace nf::cuda::lt {

// One product D = epilogue(alpha op(A) op(B) + beta C), column-major, strided-batched; every
// pointer is device memory. Layouts: op(A) m x k (A stored k x m when transa), op(B) k x n (B
// stored n x k when transb), C and D m x n with the same ld and batch stride. Element types: A and B
// a_type, C, D, aux, bias and bias_grad c_type (NF_CUDA_R_32F or NF_CUDA_R_16BF): cublasLt.h gives
// the bias vector D's type (BIAS_DATA_TYPE may differ for int8 and fp8 kernels only).
struct Product {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  bool transa = false, transb = false;
  int a_type = 0, c_type = 0;      // NF_CUDA_R_* (cublaslt_api.h)
  const void* A = nullptr;
  int64_t lda = 0, strideA = 0;
  const void* B = nullptr;
  int64_t ldb = 0, strideB = 0;
  const void* C = nullptr;  // read only when beta != 0 (may equal D)
  void* D = nullptr;
  int64_t ldc = 0, strideC = 0;
  float alpha = 1.0f, beta = 0.0f;
  uint32_t epilogue = 1;           // NF_CUBLASLT_EPILOGUE_* (cublaslt_api.h)
  const void* bias = nullptr;      // BIAS epilogues: [m], added to every column
  void* bias_grad = nullptr;       // BGRADB: [n] = Σ_k op(B)[k, j], overwritten
  void* aux = nullptr;             // GELU_AUX: the GELU input (written); DGELU: read
  int64_t aux_ld = 0, aux_stride = 0;
  int compute = 68;                // NF_CUBLAS_COMPUTE_* (cublaslt_api.h)
};

// Whether cuBLASLt is loaded (loading it on the first call, with the one warning when it is not).
bool available();

// Runs p on the backend's stream. *ran is false (and the Status Ok) when cuBLASLt cannot: not
// loaded, or it offers no algorithm for this product (the caller runs its own kernels); an error
// when a call that should succeed fails (cublasLtMatmul itself, the handle, the workspace).
Status matmul(const Product& p, bool* ran);

// What the loader found and what has run through it.
struct Info {
  bool loaded = false;
  bool stand_in = false;     // the library is nodeformer's CPU stand-in
  std::string library;       // the file opened (empty when none)
  std::string reason;        // why none is loaded (empty when loaded)
  int64_t version = 0;       // cublasLtGetVersion(), e.g. 130400
  int64_t workspace_bytes = 0;  // the matmul workspace (allocated on the first product)
  int64_t matmuls = 0;       // cublasLtMatmul calls
  int64_t fused = 0;         // ... of them with an epilogue other than DEFAULT
  int64_t tf32 = 0;          // ... of them in CUBLAS_COMPUTE_32F_FAST_TF32
  int64_t bf16 = 0;          // ... of them in CUBLAS_COMPUTE_32F_FAST_16BF or over bf16 operands
  int64_t heuristic_queries = 0;  // cublasLtMatmulAlgoGetHeuristic calls (the rest hit the cache)
  int64_t unsupported = 0;   // products it offered no algorithm for (run by our kernels instead)
};
// Loads the library on first use (printing the one warning when there is none).
Info info();

}  // namespace nf::cuda::lt
