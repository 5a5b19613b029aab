#include "malloc_policy.h"

#include <cstdlib>
#include <cstring>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace nf {

constexpr long kMmapThreshold = 32L << 20;   // glibc's largest (DEFAULT_MMAP_THRESHOLD_MAX on 64-bit)
constexpr long kTrimThreshold = 256L << 20;

MallocPolicy apply_malloc_policy() {
  static const MallocPolicy policy = [] {
    const char* env = std::getenv("NF_MALLOC_TUNING");
    if (env && std::strcmp(env, "0") == 0) return MallocPolicy{false, 0, 0};
#if defined(__GLIBC__)
    if (mallopt(M_MMAP_THRESHOLD, kMmapThreshold) == 1 && mallopt(M_TRIM_THRESHOLD, kTrimThreshold) == 1)
      return MallocPolicy{true, kMmapThreshold, kTrimThreshold};
#endif
    return MallocPolicy{false, 0, 0};
  }();
  return policy;
}

}  // namespace nf
