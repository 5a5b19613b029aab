// 64-byte aligned host memory (one cache line, one AVX-512 register), and per-thread scratch
// buffers that kernels reuse across calls so a steady-state step allocates nothing.
#pragma once
#include <cstddef>

namespace nf {

constexpr size_t kAlignment = 64;

// Returns nullptr on failure (size 0 gives a valid, unique pointer). Free with aligned_free.
void* aligned_alloc64(size_t bytes);
void aligned_free(void* p);

// The per-thread scratch slots of the CPU kernels, and who holds each. A buffer stays valid until
// the same thread asks for the same slot again, so a kernel must never take a slot that a kernel
// above it on the same call (its caller, its caller's caller) still holds. Every use names its
// slot (there is no int overload): a new kernel picks the slot of its row below, and a review of a
// new row or a new use is a review of this table.
//   A kernel that calls others while holding a buffer takes `layer` or `tile`; the kernels it calls
//   (gemm, linear, the attention core) take only `gemm_pack` and `tile`; leaves take any slot none
//   of their callers hold.
enum class ScratchSlot : int {
  // gemm's packed panels, for the duration of one product. Taken by gemm only; every product of
  // the other kernels (linear, attention, feed-forward, patch embedding) runs through gemm.
  gemm_pack = 0,
  // Partial sums of a leaf kernel that calls nothing: layernorm backward's per-chunk dγ, dβ; and
  // gemm's partial products of a long K cut into ranges (no caller of gemm holds this slot).
  partials = 1,
  // A layer's own buffer, held across its calls to linear / gemm / the attention core: attention
  // backward's projection gradients, attention decode's projected rows, the feed-forward
  // backward's dh, the patch embedding's patch matrix. Also leaf reductions that call nothing:
  // the loss and optimizer per-chunk sums, the sinusoidal table's frequencies.
  layer = 2,
  // The attention core's per-thread tiles (taken inside the core, on every pool thread), and the
  // patch embedding's patch gradient (held across linear_backward, which never reaches the core).
  tile = 3,
  // gemm's float32 product behind a bfloat16 C over more than one k block (its running sums, which a
  // bf16 C would round at every block), held across its inner product and epilogue pass.
  bf16_sums = 4,
};
constexpr int kScratchSlots = 5;

// A per-thread, per-slot scratch buffer of at least `bytes`, 64-byte aligned, grown on demand
// and kept for the thread's lifetime. Returns nullptr if the allocation fails: a kernel whose
// chunk of a parallel region gets nullptr reports it (threadpool.h's report_failure) and skips the
// chunk, and its op fails with an out-of-memory error. For the tests,
// NF_TEST_SCRATCH_FAIL=1 makes every allocation made inside a parallel region fail (those of a
// region's pool threads, and the calling thread's when its first request comes there).
void* thread_scratch(ScratchSlot slot, size_t bytes);

}  // namespace nf
