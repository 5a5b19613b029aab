#include "allocator.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "threadpool.h"

namespace nf {

// Aligned by hand inside a plain malloc block (the block's address stored just before the
// returned pointer) rather than with aligned_alloc: glibc's memalign asks for more than it keeps,
// so a freed block never fits the next request of the same size and a training loop's
// allocate/release cycle grew the heap by every tensor it made.
void* aligned_alloc64(size_t bytes) {
  size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded == 0) rounded = kAlignment;
  if (rounded > SIZE_MAX - kAlignment) return nullptr;
  void* raw = std::malloc(rounded + kAlignment);
  if (!raw) return nullptr;
  // malloc aligns to at least 16, so there are 16 to 64 bytes before the aligned address.
  auto aligned = (reinterpret_cast<uintptr_t>(raw) + kAlignment) & ~static_cast<uintptr_t>(kAlignment - 1);
  reinterpret_cast<void**>(aligned)[-1] = raw;
  return reinterpret_cast<void*>(aligned);
}

void aligned_free(void* p) {
  if (p) std::free(static_cast<void**>(p)[-1]);
}

namespace {
struct Scratch {
  void* ptr[kScratchSlots] = {};
  size_t size[kScratchSlots] = {};
  ~Scratch() {
    for (void* p : ptr) aligned_free(p);
  }
};
thread_local Scratch tls_scratch;

// NF_TEST_SCRATCH_FAIL=1 (allocator.h): allocations inside parallel regions fail.
const bool g_fail_in_regions = [] {
  const char* s = std::getenv("NF_TEST_SCRATCH_FAIL");
  return s && std::strcmp(s, "1") == 0;
}();
}  // namespace

void* thread_scratch(ScratchSlot which, size_t bytes) {
  const int slot = static_cast<int>(which);
  if (slot < 0 || slot >= kScratchSlots) return nullptr;
  Scratch& s = tls_scratch;
  if (s.size[slot] < bytes || !s.ptr[slot]) {
    aligned_free(s.ptr[slot]);
    s.ptr[slot] = g_fail_in_regions && in_parallel_region() ? nullptr : aligned_alloc64(bytes);
    s.size[slot] = s.ptr[slot] ? bytes : 0;
  }
  return s.ptr[slot];
}

}  // namespace nf
