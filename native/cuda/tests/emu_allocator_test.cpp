// The caching allocator (device.h) on an emulated device of limited capacity (the emulator's
// options().device_bytes, what NF_EMU_DEVICE_BYTES sets): cudaMalloc fails past the capacity; a
// request that fits only once the idle cached blocks are released succeeds through the retry; one
// that does not fit even then fails with ERR_NF_CUDA_OOM and leaves the counters consistent; the
// backend's scratch buffers (workspace) grow the same way.
#include <mutex>
#include <string>

#include "../common.cuh"
#include "../device.h"
#include "harness.h"

namespace {

using namespace nf;

constexpr size_t KiB = 1024;

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// For its lifetime: an empty cache with a cap of 64 MiB, no scratch buffers, and a device with room
// for `room` bytes beyond what is allocated now.
struct Room {
  size_t saved_capacity;
  int64_t saved_limit;
  explicit Room(size_t room) : saved_capacity(emu::options().device_bytes), saved_limit(cuda::memory_stats().limit_bytes) {
    (void)cuda::release_workspace();
    (void)cuda::set_cache_limit(64 << 20);
    (void)cuda::empty_cache();
    std::lock_guard<std::mutex> lock(emu::detail::allocation_mutex());
    emu::options().device_bytes = emu::detail::allocated_bytes() + room;
  }
  ~Room() {
    emu::options().device_bytes = saved_capacity;
    (void)cuda::release_workspace();
    (void)cuda::empty_cache();
    (void)cuda::set_cache_limit(saved_limit);
  }
};

NF_TEST(emulator_device_capacity) {
  Room room(1024 * KiB);
  void* a = nullptr;
  void* b = nullptr;
  void* c = nullptr;
  NF_EXPECT(cudaMalloc(&a, 1024 * KiB + 1) == cudaErrorMemoryAllocation && !a);
  NF_EXPECT(cudaGetLastError() == cudaErrorMemoryAllocation && cudaGetLastError() == cudaSuccess);
  NF_ASSERT(cudaMalloc(&a, 512 * KiB) == cudaSuccess && cudaMalloc(&b, 512 * KiB) == cudaSuccess);
  size_t free_bytes = 1, total = 0;
  NF_EXPECT(cudaMemGetInfo(&free_bytes, &total) == cudaSuccess && free_bytes == 0 && total == emu::options().device_bytes);
  NF_EXPECT(cudaMalloc(&c, 1) == cudaErrorMemoryAllocation && !c);
  (void)cudaGetLastError();
  NF_EXPECT(cudaFree(a) == cudaSuccess);
  NF_EXPECT(cudaMalloc(&c, 512 * KiB) == cudaSuccess && c);  // room again once freed
  NF_EXPECT(cudaFree(b) == cudaSuccess && cudaFree(c) == cudaSuccess);
  NF_EXPECT(cudaMemGetInfo(&free_bytes, &total) == cudaSuccess && free_bytes == 1024 * KiB);
}

NF_TEST(allocator_retries_after_releasing_idle_blocks) {
  Room room(1024 * KiB);
  void* a = nullptr;
  void* b = nullptr;
  NF_ASSERT(cuda::cached_block_capacity(600 * KiB) == 640 * KiB && cuda::cached_block_capacity(700 * KiB) == 768 * KiB);
  NF_ASSERT_OK(cuda::cached_alloc(&a, 600 * KiB));
  NF_ASSERT_OK(cuda::cached_free(a, 600 * KiB));  // 640 KiB idle: 384 KiB of the device left
  const cuda::MemoryStats s0 = cuda::memory_stats();
  NF_EXPECT(s0.cached_bytes == int64_t(640 * KiB));

  // 768 KiB fits only once the idle block is released: the retry.
  NF_ASSERT_OK(cuda::cached_alloc(&b, 700 * KiB));
  const cuda::MemoryStats s1 = cuda::memory_stats();
  NF_EXPECT(s1.released == s0.released + 1 && s1.cached_bytes == 0 && s1.fresh == s0.fresh + 1);
  NF_EXPECT(s1.live_bytes == s0.live_bytes + int64_t(768 * KiB));

  // 512 KiB more does not fit, with nothing idle to release: ERR_NF_CUDA_OOM, counters unchanged.
  void* c = reinterpret_cast<void*>(1);
  Status st = cuda::cached_alloc(&c, 512 * KiB);
  NF_ASSERT(!st.ok());
  NF_EXPECT(st.code && std::string(st.code) == "ERR_NF_CUDA_OOM" && st.op == "device_alloc");
  // (What else is live, such as cuBLASLt's workspace from an earlier test, adds to the live and
  // total figures; the free figure is the Room's.)
  for (const char* part : {"cannot allocate 512 KiB (524288 bytes)", "live tensors hold ",
                           "idle cached blocks: none to release, 0 B held now (cache limit 64.0 MiB, NF_CUDA_CACHE_BYTES)",
                           "the device has 256 KiB free of ", "try a smaller batch"})
    NF_EXPECT(has(st.message, part), std::string("missing \"") + part + "\" in: " + st.message);
  const cuda::MemoryStats s2 = cuda::memory_stats();
  NF_EXPECT(s2.live_bytes == s1.live_bytes && s2.cached_bytes == 0 && s2.fresh == s1.fresh && s2.released == s1.released);

  // A 256 KiB block idle next to the live 768 KiB: 512 KiB still fails after releasing it.
  NF_ASSERT_OK(cuda::cached_alloc(&a, 256 * KiB));
  NF_ASSERT_OK(cuda::cached_free(a, 256 * KiB));
  st = cuda::cached_alloc(&c, 512 * KiB);
  NF_EXPECT(!st.ok() && st.code && std::string(st.code) == "ERR_NF_CUDA_OOM");
  NF_EXPECT(has(st.message, "idle cached blocks: 256 KiB released before retrying, 0 B held now"), st.message);
  const cuda::MemoryStats s3 = cuda::memory_stats();
  NF_EXPECT(s3.live_bytes == s1.live_bytes && s3.cached_bytes == 0 && s3.released == s2.released + 1);

  // Freeing the live block makes room: the same request now succeeds (the retry releases the
  // freed 768 KiB block, now idle).
  NF_ASSERT_OK(cuda::cached_free(b, 700 * KiB));
  NF_ASSERT_OK(cuda::cached_alloc(&c, 512 * KiB));
  NF_ASSERT_OK(cuda::cached_free(c, 512 * KiB));
  NF_EXPECT(cuda::memory_stats().live_bytes == s0.live_bytes);
}

NF_TEST(allocator_workspace_retries_after_releasing_idle_blocks) {
  Room room(1024 * KiB);
  void* a = nullptr;
  NF_ASSERT_OK(cuda::cached_alloc(&a, 768 * KiB));
  NF_ASSERT_OK(cuda::cached_free(a, 768 * KiB));  // idle: 256 KiB of the device left
  const cuda::MemoryStats s0 = cuda::memory_stats();
  void* w = nullptr;
  NF_ASSERT_OK(cuda::stream_run([&] { return cuda::workspace(0, 512 * KiB, &w); }));
  NF_EXPECT(w != nullptr && cuda::memory_stats().released == s0.released + 1 && cuda::memory_stats().cached_bytes == 0);
  const Status st = cuda::stream_run([&] { return cuda::workspace(1, 768 * KiB, &w); });
  NF_EXPECT(!st.ok() && st.code && std::string(st.code) == "ERR_NF_CUDA_OOM" && st.op == "workspace", st.message);
  NF_EXPECT(has(st.message, "cannot allocate 768 KiB"), st.message);
  NF_ASSERT_OK(cuda::release_workspace());
  NF_ASSERT_OK(cuda::stream_run([&] { return cuda::workspace(1, 768 * KiB, &w); }));  // room once the slots are freed
}

}  // namespace
