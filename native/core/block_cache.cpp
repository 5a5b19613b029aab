#include "block_cache.h"

#include <cstdlib>
#include <iterator>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "allocator.h"

namespace nf {

namespace {

constexpr size_t kSmall = 4096;

int64_t limit_from_env() {
  const char* v = std::getenv("NF_CACHE_BYTES");
  if (!v || !*v) return int64_t{256} << 20;
  char* end = nullptr;
  long long n = std::strtoll(v, &end, 10);
  return (end && *end == '\0' && n >= 0) ? n : int64_t{256} << 20;
}

struct Cache {
  std::mutex mutex;
  std::unordered_map<size_t, std::vector<void*>> idle;  // capacity -> idle blocks
  BlockCacheStats stats{0, 0, 0, 0, limit_from_env()};

  // Frees idle blocks until cached_bytes <= target. Caller holds the mutex.
  void trim(int64_t target) {
    for (auto it = idle.begin(); it != idle.end() && stats.cached_bytes > target;) {
      auto& blocks = it->second;
      while (!blocks.empty() && stats.cached_bytes > target) {
        aligned_free(blocks.back());
        blocks.pop_back();
        stats.cached_bytes -= static_cast<int64_t>(it->first);
      }
      it = blocks.empty() ? idle.erase(it) : std::next(it);
    }
  }
};

// Never destroyed: blocks may be returned by GC finalizers during process teardown.
Cache& cache() {
  static Cache* c = new Cache();
  return *c;
}

}  // namespace

size_t block_capacity(size_t bytes) {
  if (bytes <= kSmall) return bytes == 0 ? kAlignment : (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (bytes > (SIZE_MAX >> 2)) return 0;
  size_t octave = size_t{1} << (63 - __builtin_clzll(bytes));  // largest power of two <= bytes
  size_t step = octave / 4;
  return (bytes + step - 1) / step * step;
}

void* block_alloc(size_t bytes) {
  size_t capacity = block_capacity(bytes);
  if (capacity == 0) return nullptr;
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    auto it = c.idle.find(capacity);
    if (it != c.idle.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      c.stats.cached_bytes -= static_cast<int64_t>(capacity);
      c.stats.live_bytes += static_cast<int64_t>(capacity);
      ++c.stats.reused;
      return p;
    }
  }
  void* p = aligned_alloc64(capacity);
  if (!p) {
    // Memory is short: give the idle blocks back and try once more.
    block_cache_empty();
    p = aligned_alloc64(capacity);
    if (!p) return nullptr;
  }
  std::lock_guard<std::mutex> lock(c.mutex);
  c.stats.live_bytes += static_cast<int64_t>(capacity);
  ++c.stats.fresh;
  return p;
}

void block_free(void* p, size_t bytes) {
  if (!p) return;
  size_t capacity = block_capacity(bytes);
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.stats.live_bytes -= static_cast<int64_t>(capacity);
  if (c.stats.cached_bytes + static_cast<int64_t>(capacity) > c.stats.limit_bytes) {
    aligned_free(p);
    return;
  }
  c.idle[capacity].push_back(p);
  c.stats.cached_bytes += static_cast<int64_t>(capacity);
}

BlockCacheStats block_cache_stats() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.stats;
}

void block_cache_empty() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.trim(0);
}

void block_cache_set_limit(int64_t bytes) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.stats.limit_bytes = bytes < 0 ? 0 : bytes;
  c.trim(c.stats.limit_bytes);
}

}  // namespace nf
