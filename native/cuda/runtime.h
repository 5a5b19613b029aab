// What every .cu file of the CUDA backend includes first: the CUDA runtime under nvcc, the SIMT
// emulator (emulator/simt.h) under a host compiler, and the few things that differ between the two
// behind one spelling:
//   nf::cuda::launch(kernel, grid, block, smem_bytes, stream, args...)  instead of <<<...>>>
//   NF_SHARED(T, name)          static shared memory, e.g. NF_SHARED(float[16][65], tile)
//   NF_DYNAMIC_SHARED(T, name)  the launch's dynamic shared memory as T*
//   NF_CUDA_TRY(op, call)       returns an nf::Status naming op, the call, and file:line when a
//                               CUDA call fails
#pragma once

#include <cstddef>
#include <string>
#include <utility>

#include "../core/status.h"

#if defined(__CUDACC__)
#include <cuda_runtime.h>

template <class T>
using nf_shared_t = T;
#define NF_SHARED(T, name) __shared__ ::nf_shared_t<T> name
#define NF_DYNAMIC_SHARED(T, name)                                  \
  extern __shared__ __align__(16) unsigned char nf_dynamic_shared_[]; \
  T* name = reinterpret_cast<T*>(nf_dynamic_shared_)
#else
#include "emulator/simt.h"
#endif

namespace nf::cuda {

// Dynamic shared memory beyond this needs the kernel's opt-in (cudaFuncSetAttribute).
constexpr size_t kDefaultSharedLimit = 48 * 1024;

// Launches kernel<<<grid, block, smem_bytes, stream>>>(args...) (or runs it in the emulator) and
// returns the launch's error.
template <class... P, class... A>
cudaError_t launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem_bytes, cudaStream_t stream,
                   A&&... args) {
  if (smem_bytes > kDefaultSharedLimit) {
    cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem_bytes));
    if (e != cudaSuccess) return e;
  }
#if defined(__CUDACC__)
  kernel<<<grid, block, smem_bytes, stream>>>(std::forward<A>(args)...);
  return cudaGetLastError();
#else
  return ::nf::emu::launch(kernel, grid, block, smem_bytes, stream, std::forward<A>(args)...);
#endif
}

// "cudaErrorX: text (call at file:line)".
inline std::string error_text(cudaError_t e, const char* call, const char* where) {
  return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e) + " (" + call + " at " + where + ")";
}

}  // namespace nf::cuda

#define NF_CUDA_STRINGIFY2(x) #x
#define NF_CUDA_STRINGIFY(x) NF_CUDA_STRINGIFY2(x)
#define NF_CUDA_TRY(op, ...)                                                                         \
  do {                                                                                               \
    cudaError_t nf_cuda_err_ = (__VA_ARGS__);                                                        \
    if (nf_cuda_err_ != cudaSuccess)                                                                 \
      return ::nf::Status::Error((op), ::nf::cuda::error_text(nf_cuda_err_, #__VA_ARGS__,             \
                                                              __FILE__ ":" NF_CUDA_STRINGIFY(__LINE__))); \
  } while (0)
