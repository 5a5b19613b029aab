// The registry of native allocations handed to JS as ArrayBuffers (core.allocate), and the pins
// that keep them alive while asynchronous ops use them. All functions run on the JS thread of the
// environment that made the allocation (allocate, release, GC finalizers, async completions).
//
// An allocation is freed when JS releases it (release()) or when its ArrayBuffer is collected,
// unless an asynchronous op still reads or writes it: then the free waits until the last such op
// has settled. So disposing a tensor while an op on it is in flight is never a use-after-free.
#pragma once
#include <napi.h>

#include <cstddef>
#include <vector>

namespace nf::napi {

struct Allocation;

// What a new buffer holds: zeros, or whatever its block held before (for outputs an op overwrites
// whole, which skips a memset of every activation and gradient).
enum class Fill { zero, uninitialized };

// A 64-byte aligned ArrayBuffer of `bytes` in native memory (the GC is told its size), from the
// block cache (core/block_cache.h): freed buffers' blocks serve later requests.
// Throws ERR_NF_OUT_OF_MEMORY when the allocation fails.
Napi::ArrayBuffer allocate_buffer(Napi::Env env, size_t bytes, Fill fill = Fill::zero);

// Whether uninitialized buffers are filled with all-ones bytes (NaN as float32) instead, so that
// an op that leaves part of its output unwritten shows up as NaN: NF_POISON_UNINITIALIZED=1
// (the test suite sets it).
bool poison_uninitialized();

// Bytes of native buffers made by allocate_buffer and not yet freed (in every context).
int64_t allocated_bytes();

// Detaches `buffer` and frees its memory now, or when the async ops pinning it settle.
// A buffer not made by allocate_buffer is only detached.
void release_buffer(Napi::Env env, Napi::ArrayBuffer buffer);

// Pins the allocations behind these buffer data pointers (pointers from elsewhere are skipped).
std::vector<Allocation*> pin(const std::vector<void*>& data);

// Drops pins taken by pin(); frees what was released or collected in the meantime.
void unpin(Napi::Env env, std::vector<Allocation*>& pinned);

}  // namespace nf::napi
