#include "allocator.h"

#include <cstdlib>

namespace nf {

void* aligned_alloc64(size_t bytes) {
  size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded == 0) rounded = kAlignment;
  return std::aligned_alloc(kAlignment, rounded);
}

void aligned_free(void* p) { std::free(p); }

namespace {
struct Scratch {
  void* ptr[kScratchSlots] = {};
  size_t size[kScratchSlots] = {};
  ~Scratch() {
    for (void* p : ptr) aligned_free(p);
  }
};
thread_local Scratch tls_scratch;
}  // namespace

void* thread_scratch(int slot, size_t bytes) {
  if (slot < 0 || slot >= kScratchSlots) return nullptr;
  Scratch& s = tls_scratch;
  if (s.size[slot] < bytes || !s.ptr[slot]) {
    aligned_free(s.ptr[slot]);
    s.ptr[slot] = aligned_alloc64(bytes);
    s.size[slot] = s.ptr[slot] ? bytes : 0;
  }
  return s.ptr[slot];
}

}  // namespace nf
