// A caching allocator for tensor memory: freed blocks are kept in per-size-class free lists and
// handed out again to the next request of the same class, so a training loop that makes the same
// activations every step reuses last step's blocks instead of returning them to malloc and asking
// again (which costs page faults and, with glibc, fragments the heap until RSS creeps up).
//
// Size classes: a request is rounded up to 64 bytes below 4 KiB, and above that to the next of
// four steps per power of two (2^k, 1.25*2^k, 1.5*2^k, 1.75*2^k), so a block wastes < 25%.
// Idle (cached) bytes are capped (NF_CACHE_BYTES, default 256 MiB; 0 disables caching): a freed
// block that would exceed the cap goes back to the system. Thread-safe (one mutex).
#pragma once
#include <cstddef>
#include <cstdint>

namespace nf {

struct BlockCacheStats {
  int64_t live_bytes;    // capacity of blocks handed out and not yet returned
  int64_t cached_bytes;  // capacity of idle blocks kept for reuse
  int64_t fresh;         // blocks obtained from the system since start
  int64_t reused;        // requests served from the cache since start
  int64_t limit_bytes;   // cap on cached_bytes
};

// The size class (a block's capacity) that serves a request of `bytes`; 0 if it overflows.
size_t block_capacity(size_t bytes);

// A 64-byte aligned block of block_capacity(bytes) bytes (contents undefined), or nullptr.
void* block_alloc(size_t bytes);
// Returns a block from block_alloc(bytes) (the same `bytes`) to the cache or the system.
void block_free(void* p, size_t bytes);

BlockCacheStats block_cache_stats();
// Returns every idle block to the system.
void block_cache_empty();
// Sets the cap on idle bytes (trimming the cache to it now).
void block_cache_set_limit(int64_t bytes);

}  // namespace nf
