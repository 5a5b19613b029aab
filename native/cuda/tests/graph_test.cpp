// CUDA graphs (device.h) on any device (the emulator's stream capture, emulator/capture.h, or a GPU):
// a capture records kernels, device copies and fills and a replay runs them on the inputs of the
// moment; a step value (dropout's seed read from device memory) changes between replays; the
// memory a capture allocates stays the graph's (a private pool) until the graph is destroyed; a
// copy to the host or a wait inside the capture makes it fail, and the stream works afterwards; a
// graph whose scratch buffer moved is stale (ERR_NF_GRAPH_STALE) instead of reading freed memory.
#include <cstring>
#include <string>
#include <vector>

#include "../device.h"
#include "../elementwise.h"
#include "../grad_norm.h"
#include "harness.h"

namespace {

using namespace nf;

std::vector<float> download(const float* d, size_t n) {
  std::vector<float> h(n);
  NF_ASSERT(cuda::copy_to_host(h.data(), d, n * sizeof(float)).ok());
  return h;
}

struct Buf {
  float* p = nullptr;
  size_t bytes;
  explicit Buf(size_t n) : bytes(n * sizeof(float)) {
    void* v = nullptr;
    NF_ASSERT(cuda::cached_alloc(&v, bytes).ok());
    p = static_cast<float*>(v);
  }
  ~Buf() { (void)cuda::cached_free(p, bytes); }
  void set(const std::vector<float>& h) { NF_ASSERT(cuda::copy_to_device(p, h.data(), bytes).ok()); }
};

}  // namespace

NF_TEST(graph_capture_replays_on_new_inputs) {
  const size_t n = 1000;
  Buf a(n), b(n), out(n), copy(n);
  std::vector<float> ha(n), hb(n);
  for (size_t i = 0; i < n; ++i) ha[i] = float(i), hb[i] = 0.5f * float(i);
  a.set(ha);
  b.set(hb);
  const cuda::GraphStats before = cuda::graph_stats();
  NF_ASSERT(cuda::graph_begin().ok());
  NF_ASSERT(cuda::graph_capturing());
  NF_EXPECT(cuda::add(out.p, a.p, b.p, int64_t(n)).ok());
  NF_EXPECT(cuda::copy_on_device(copy.p, out.p, out.bytes).ok());
  NF_EXPECT(cuda::fill_zero(out.p, 4 * sizeof(float)).ok());
  cuda::Graph* g = nullptr;
  NF_ASSERT(cuda::graph_end(&g).ok());
  NF_ASSERT(g != nullptr);
  NF_EXPECT(!cuda::graph_capturing());
  NF_EXPECT(cuda::graph_stats().captures == before.captures + 1);
  for (float scale : {1.0f, 3.0f}) {  // new inputs before each replay
    for (size_t i = 0; i < n; ++i) ha[i] = scale * float(i);
    a.set(ha);
    NF_ASSERT(cuda::graph_launch(g).ok());
    const std::vector<float> c = download(copy.p, n), o = download(out.p, n);
    for (size_t i = 0; i < n; ++i) NF_EXPECT(c[i] == ha[i] + hb[i], "copy of a + b");
    for (size_t i = 0; i < n; ++i) NF_EXPECT(o[i] == (i < 4 ? 0.0f : ha[i] + hb[i]), "filled, then a + b");
  }
  NF_EXPECT(cuda::graph_stats().launches == before.launches + 2);
  NF_EXPECT(cuda::graph_destroy(g).ok());
  NF_EXPECT(cuda::graph_stats().live == before.live);
}

NF_TEST(graph_step_value_seed_changes_between_replays) {
  const size_t n = 4096;
  Buf x(n), y(n), want(n);
  double* seed = nullptr;
  NF_ASSERT(cuda::cached_alloc(reinterpret_cast<void**>(&seed), sizeof(double)).ok());
  x.set(std::vector<float>(n, 1.0f));
  NF_ASSERT(cuda::graph_begin().ok());
  NF_EXPECT(cuda::dropout(y.p, x.p, int64_t(n), 0.5f, /*seed*/ 0, /*offset*/ 3, seed).ok());
  cuda::Graph* g = nullptr;
  NF_ASSERT(cuda::graph_end(&g).ok());
  for (double s : {12345.0, 987654321.0}) {
    NF_ASSERT(cuda::copy_to_device(seed, &s, sizeof s).ok());
    NF_ASSERT(cuda::graph_launch(g).ok());
    NF_ASSERT(cuda::dropout(want.p, x.p, int64_t(n), 0.5f, uint64_t(s), 3).ok());  // the seed as an argument
    const std::vector<float> got = download(y.p, n), ref = download(want.p, n);
    NF_EXPECT(std::memcmp(got.data(), ref.data(), n * sizeof(float)) == 0, "replay == eager with the same seed");
  }
  NF_EXPECT(cuda::graph_destroy(g).ok());
  (void)cuda::cached_free(seed, sizeof(double));
}

NF_TEST(graph_pool_keeps_capture_memory_until_destroyed) {
  const size_t bytes = 3 << 20;  // a size class no other test leaves idle
  const cuda::MemoryStats before = cuda::memory_stats();
  NF_ASSERT(cuda::graph_begin().ok());
  void* p = nullptr;
  NF_ASSERT(cuda::cached_alloc(&p, bytes).ok());
  NF_EXPECT(cuda::fill_zero(p, bytes).ok());
  NF_EXPECT(cuda::cached_free(p, bytes).ok());  // back to the pool, not the cache
  void* q = nullptr;
  NF_ASSERT(cuda::cached_alloc(&q, bytes).ok());  // the capture's next request of the class: the same block
  NF_EXPECT(q == p);
  NF_EXPECT(cuda::cached_free(q, bytes).ok());
  cuda::Graph* g = nullptr;
  NF_ASSERT(cuda::graph_end(&g).ok());
  const size_t block = cuda::cached_block_capacity(bytes);
  NF_EXPECT(cuda::memory_stats().graph_bytes == before.graph_bytes + int64_t(block));
  void* r = nullptr;  // outside the capture: never the graph's block
  NF_ASSERT(cuda::cached_alloc(&r, bytes).ok());
  NF_EXPECT(r != p);
  NF_EXPECT(cuda::cached_free(r, bytes).ok());
  NF_EXPECT(cuda::graph_launch(g).ok());
  NF_EXPECT(cuda::graph_destroy(g).ok());
  NF_EXPECT(cuda::memory_stats().graph_bytes == before.graph_bytes);
  void* s = nullptr;  // the pool's block is the cache's again
  NF_ASSERT(cuda::cached_alloc(&s, bytes).ok());
  NF_EXPECT(s == p || s == r);
  NF_EXPECT(cuda::cached_free(s, bytes).ok());
}

NF_TEST(graph_capture_fails_on_a_copy_to_the_host) {
  Buf x(16);
  x.set(std::vector<float>(16, 2.0f));
  const cuda::GraphStats before = cuda::graph_stats();
  NF_ASSERT(cuda::graph_begin().ok());
  float h[16];
  NF_EXPECT(!cuda::copy_to_host(h, x.p, sizeof h).ok(), "a copy to the host cannot be captured");
  cuda::Graph* g = nullptr;
  const Status end = cuda::graph_end(&g);
  NF_EXPECT(!end.ok() && g == nullptr, "the capture is invalidated");
  NF_EXPECT(cuda::graph_stats().failed == before.failed + 1);
  NF_EXPECT(!cuda::graph_capturing());
  const std::vector<float> after = download(x.p, 16);  // the stream works again
  NF_EXPECT(after[0] == 2.0f);
}

NF_TEST(graph_goes_stale_when_a_scratch_buffer_moves) {
  Buf x(5000), out(1);
  x.set(std::vector<float>(5000, 1.0f));
  NF_ASSERT(cuda::sum_squares(out.p, x.p, 5000).ok());  // (sizes scratch slot 0 before the capture)
  NF_ASSERT(cuda::graph_begin().ok());
  NF_EXPECT(cuda::sum_squares(out.p, x.p, 5000).ok());
  cuda::Graph* g = nullptr;
  NF_ASSERT(cuda::graph_end(&g).ok());
  NF_EXPECT(cuda::graph_fresh(g));
  NF_EXPECT(cuda::graph_launch(g).ok());
  NF_EXPECT(download(out.p, 1)[0] == 5000.0f);
  NF_ASSERT(cuda::release_workspace().ok());  // the slot the graph reads is gone
  NF_EXPECT(!cuda::graph_fresh(g));
  const Status s = cuda::graph_launch(g);
  NF_EXPECT(!s.ok() && s.code && std::string(s.code) == "ERR_NF_GRAPH_STALE", s.message);
  NF_EXPECT(cuda::graph_destroy(g).ok());
}
