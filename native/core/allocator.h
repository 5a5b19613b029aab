// 64-byte aligned host memory (one cache line, one AVX-512 register), and per-thread scratch
// buffers that kernels reuse across calls so a steady-state step allocates nothing.
#pragma once
#include <cstddef>

namespace nf {

constexpr size_t kAlignment = 64;

// Returns nullptr on failure (size 0 gives a valid, unique pointer). Free with aligned_free.
void* aligned_alloc64(size_t bytes);
void aligned_free(void* p);

// A per-thread, per-slot scratch buffer of at least `bytes`, 64-byte aligned, grown on demand
// and kept for the thread's lifetime. Valid until the same thread asks for the same slot again.
// Returns nullptr if the allocation fails.
constexpr int kScratchSlots = 4;
void* thread_scratch(int slot, size_t bytes);

}  // namespace nf
