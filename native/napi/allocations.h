// Tensor memory and the async ops that use it. CPU tensor memory is an ordinary JS ArrayBuffer
// (V8's allocator: see lib/core/tensor.ts): the GC frees it directly when it becomes unreachable, with
// no finalizer of ours to wait for the event loop, so a synchronous loop that never yields and
// never disposes keeps flat memory. What native code adds:
// - release(): detaches a buffer, which frees its memory at once (Tensor.dispose), and
// - pins: an asynchronous op in flight holds references to the typed arrays it reads and writes
//   (they cannot be collected) and pins their buffers, so that a release() meanwhile only marks
//   the buffer; the op detaches it when it settles. Disposing a tensor while an op on it is in
//   flight is never a use-after-free.
// All functions run on the JS thread of the environment that owns the buffers.
#pragma once
#include <napi.h>

#include <cstddef>
#include <vector>

namespace nf::napi {

// Detaches `buffer` (freeing its memory) now, or, while an async op pins it, when that op settles.
void release_buffer(Napi::ArrayBuffer buffer);

// Pins the buffers with these data pointers; returns the pointers pinned (for unpin).
std::vector<void*> pin(const std::vector<void*>& data);

// Drops pins taken by pin(). `buffers` are the op's ArrayBuffers: those released while pinned
// and no longer pinned by any other op are detached now.
void unpin(std::vector<void*>& pinned, const std::vector<Napi::ArrayBuffer>& buffers);

// Bytes from `buffer`'s start to its first 64-byte aligned address (0 to 63).
size_t aligned_offset(Napi::ArrayBuffer buffer);

}  // namespace nf::napi
