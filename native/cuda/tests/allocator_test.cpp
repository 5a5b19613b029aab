// The caching allocator (device.h) out of device memory, on any device (the emulator or a GPU): a
// request no device holds fails with code ERR_NF_CUDA_OOM and a message naming the request and what
// to try, after the idle blocks were released; the counters stay consistent and the next request
// succeeds. (emu_allocator_test.cpp covers the retry itself on an emulated device of limited size.)
#include <string>

#include "../device.h"
#include "harness.h"

namespace {

using namespace nf;

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

NF_TEST(allocator_out_of_memory_is_an_error_and_recoverable) {
  void* idle = nullptr;
  NF_ASSERT_OK(cuda::cached_alloc(&idle, 3000));
  NF_ASSERT_OK(cuda::cached_free(idle, 3000));  // an idle block, released by the retry
  const cuda::MemoryStats before = cuda::memory_stats();
  NF_ASSERT(before.cached_bytes > 0 || before.limit_bytes == 0);

  void* p = reinterpret_cast<void*>(1);
  const size_t huge = size_t(1) << 50;  // 1 PiB: more than any device
  const Status st = cuda::cached_alloc(&p, huge);
  NF_ASSERT(!st.ok(), "a 1 PiB allocation succeeded");
  NF_EXPECT(st.code && std::string(st.code) == "ERR_NF_CUDA_OOM", st.code ? st.code : "(no code)");
  NF_EXPECT(st.op == "device_alloc", st.op);
  for (const char* part : {"CUDA out of memory", "1.00 PiB (1125899906842624 bytes)", "live tensors hold",
                           " released before retrying, 0 B held now (cache limit", "cache limit", "free of",
                           "a smaller batch, cudaEmptyCache(), or NF_CUDA_CACHE_BYTES"})
    NF_EXPECT(has(st.message, part), std::string("missing \"") + part + "\" in: " + st.message);

  const cuda::MemoryStats after = cuda::memory_stats();
  NF_EXPECT(after.live_bytes == before.live_bytes && after.fresh == before.fresh && after.reused == before.reused);
  NF_EXPECT(after.cached_bytes == 0 && (before.cached_bytes > 0 ? after.released > before.released
                                                                  : after.released == before.released),
            std::to_string(after.released) + " released");

  // Still usable: a small request succeeds and goes back to the cache.
  NF_ASSERT_OK(cuda::cached_alloc(&p, 4096));
  NF_ASSERT_OK(cuda::fill_zero(p, 4096));
  NF_ASSERT_OK(cuda::synchronize());
  NF_ASSERT_OK(cuda::cached_free(p, 4096));
  NF_EXPECT(cuda::memory_stats().live_bytes == before.live_bytes);
}

}  // namespace
