// Atomic dQ (NF_CUDA_ATTENTION_DQ=atomic; the header of flash_attention_backward.cu): the dK/dV kernel
// instantiated with the dQ product (flash_attention_backward.cuh: add_dq_tile), its fp32 buffer and the
// store pass into dQ's view. Without attention dropout only (each instantiation costs minutes of nvcc
// time on the CI's two cores; ViT training rarely drops attention weights): with dropout, and where the
// dS tile does not fit, launch_atomic_dq launches nothing and the recompute pass runs.
// Math: dQ = scale Σ over key blocks of dS K, each block's share added by atomicAdd.
// Layout: the buffer [B, H, Tq, Dh] fp32 (workspace slot 1), dQ the view a.lq.
// Dimension key: B batch, H heads, Tq queries, Dh head width, DP padded width.
#include <algorithm>

#include "flash_attention.h"
#include "flash_attention_backward.cuh"

namespace nf::cuda {

namespace {

// Atomic dQ's last pass: dq = scale acc_dq, each element of the [B, H, Tq, Dh] accumulator into the view.
template <class O>
__global__ void __launch_bounds__(kThreads) flash_dq_store_kernel(O* dq, const float* acc_dq, CoreArgs a) {
  const int64_t n = int64_t(a.B) * a.H * a.Tq * a.Dh;
  for (int64_t x = int64_t(blockIdx.x) * kThreads + threadIdx.x; x < n; x += int64_t(gridDim.x) * kThreads) {
    const int64_t row = x / a.Dh, bh = row / a.Tq;
    const int d = int(x - row * a.Dh), i = int(row - bh * a.Tq);
    put(head_rows(dq, a.lq, bh / a.H, bh % a.H) + int64_t(i) * a.lq.row + d, a.scale * acc_dq[x]);
  }
}

}  // namespace

namespace flash {

template <class Mma, class S, class O>
Status launch_atomic_dq(O* dq, O* dk, O* dv, const ops::AttentionLayout& ldk, const ops::AttentionLayout& ldv,
                        const S* dout, const float* lse, const float* di, const S* q, const S* k, const S* v,
                        const CoreArgs& a, bool vec, cudaStream_t s, bool* ran) {
  const char* op = "flash_attention_backward";
  *ran = false;
  if (a.p > 0.0f) return Status::Ok();  // (attention dropout: the recompute pass)
  return with_padded_width(a.Dh, [&](auto dp) -> Status {
    constexpr int DP = decltype(dp)::value;
    if constexpr (!atomic_dq_fits<Mma, S, DP>()) {
      return Status::Ok();  // (the recompute pass)
    } else {
      const size_t n = size_t(a.B) * size_t(a.H) * size_t(a.Tq) * size_t(a.Dh);
      void* acc = nullptr;
      NF_TRY(workspace(1, sizeof(float) * n, &acc));
      NF_CUDA_TRY(op, cudaMemsetAsync(acc, 0, sizeof(float) * n, s));
      const dim3 keys(unsigned(ceil_div(a.Tk, kBlockRows)), unsigned(a.H), unsigned(a.B));
      NF_CUDA_TRY(op, launch(flash_dkdv_kernel<Mma, S, O, DP, false, true>, keys, dim3(kThreads),
                             dkdv_smem<Mma, S, DP, true>(), s, dk, dv, static_cast<float*>(acc), ldk, ldv, q, k, v,
                             dout, lse, di, a, vec));
      const unsigned blocks = unsigned(std::min<int64_t>(ceil_div(int64_t(n), kThreads), 65535));
      NF_CUDA_TRY(op, launch(flash_dq_store_kernel<O>, dim3(blocks), dim3(kThreads), 0, s, dq,
                             static_cast<const float*>(acc), a));
      *ran = true;
      return Status::Ok();
    }
  });
}

template Status launch_atomic_dq<Bf16Mma, float, float>(float*, float*, float*, const ops::AttentionLayout&,
                                                        const ops::AttentionLayout&, const float*, const float*,
                                                        const float*, const float*, const float*, const float*,
                                                        const CoreArgs&, bool, cudaStream_t, bool*);
template Status launch_atomic_dq<Tf32Mma, float, float>(float*, float*, float*, const ops::AttentionLayout&,
                                                        const ops::AttentionLayout&, const float*, const float*,
                                                        const float*, const float*, const float*, const float*,
                                                        const CoreArgs&, bool, cudaStream_t, bool*);
template Status launch_atomic_dq<Fp32Mma, float, float>(float*, float*, float*, const ops::AttentionLayout&,
                                                        const ops::AttentionLayout&, const float*, const float*,
                                                        const float*, const float*, const float*, const float*,
                                                        const CoreArgs&, bool, cudaStream_t, bool*);
template Status launch_atomic_dq<Bf16Mma, uint16_t, uint16_t>(uint16_t*, uint16_t*, uint16_t*,
                                                              const ops::AttentionLayout&, const ops::AttentionLayout&,
                                                              const uint16_t*, const float*, const float*,
                                                              const uint16_t*, const uint16_t*, const uint16_t*,
                                                              const CoreArgs&, bool, cudaStream_t, bool*);

}  // namespace flash

}  // namespace nf::cuda
