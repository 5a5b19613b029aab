// How the process's malloc keeps freed tensor memory. CPU tensor memory is V8 ArrayBuffer memory,
// which Node's allocator takes from malloc (lib/core/tensor.ts). glibc's defaults give blocks of more
// than 128 KiB (dynamically up to 32 MiB) back to the system with munmap, and trim the heap top
// past twice that, so a training loop that frees and re-allocates the same activations every step
// faults every page in again (~10,000 page faults and ~20% more CPU time per seed-cifar step,
// measured). At load the addon therefore asks glibc to serve blocks up to 32 MiB from the heap and
// to keep up to 256 MiB of free heap before trimming: the role of a caching allocator, played by
// malloc itself. NF_MALLOC_TUNING=0 leaves malloc's settings alone. Other C libraries: no-op.
#pragma once

namespace nf {

struct MallocPolicy {
  bool applied;           // false: NF_MALLOC_TUNING=0, or not glibc
  long mmap_threshold;    // bytes; blocks above it are mmapped
  long trim_threshold;    // bytes of free heap top kept before trimming
};

// Applies the policy (once per process; later calls return the first result).
MallocPolicy apply_malloc_policy();

}  // namespace nf
