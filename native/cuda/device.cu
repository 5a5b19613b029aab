// The device layer (device.h), the backend's stream and scratch buffers (common.cuh), the caching
// allocator of tensor memory and stream-ordered host work.
// One stream per device, created non-blocking on first use; scratch slots are per device too and
// grow on demand (cudaFree waits for the device, so a buffer is never freed under a running kernel).
// In the emulator build the backend stream is a worker thread (HostStream below): everything that
// touches device memory runs there, in submission order.
#include "device.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#if !defined(__CUDACC__)
#include <condition_variable>
#include <deque>
#include <exception>
#include <thread>
#endif

#include "common.cuh"

namespace nf::cuda {

namespace {

constexpr int kMaxDevices = 16;

struct DeviceState {
  cudaStream_t stream = nullptr;
  bool has_stream = false;
  void* scratch[kWorkspaceSlots] = {};
  size_t scratch_bytes[kWorkspaceSlots] = {};
  int64_t scratch_generation = 0;  // bumped whenever a slot moves (graphs hold its addresses)
};

std::mutex& state_mutex() {
  static std::mutex m;
  return m;
}

DeviceState& state(int device) {
  static DeviceState states[kMaxDevices];
  return states[device];
}

Status current_state(const char* op, DeviceState** s) {
  int device = 0;
  NF_CUDA_TRY(op, cudaGetDevice(&device));
  NF_CHECK(device >= 0 && device < kMaxDevices, op, "device ordinal out of range");
  *s = &state(device);
  return Status::Ok();
}

bool is_capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  return cudaStreamIsCapturing(stream, &status) == cudaSuccess && status != cudaStreamCaptureStatusNone;
}

// Defined with the caching allocator below: returns its idle blocks to the device, adding their
// bytes to *released (from -1: set to them); and the ERR_NF_CUDA_OOM Status of a request of
// `bytes` (served by a block of `block` bytes) that failed again after that.
Status release_idle(int64_t* released);
Status out_of_memory(const char* op, size_t bytes, size_t block, int64_t released);

#if !defined(__CUDACC__)
// The emulator's stream: one worker thread running submitted host work in order. Never destroyed
// (work may be submitted by GC finalizers during teardown; the thread is detached).
class HostStream {
 public:
  static HostStream& get() {
    static HostStream* s = new HostStream();
    return *s;
  }

  bool on_stream() const { return std::this_thread::get_id() == worker_id_; }

  void post(std::function<Status()> work, std::function<void(const Status&)> done) {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back({std::move(work), std::move(done)});
    ready_.notify_one();
  }

  Status run(const std::function<Status()>& work) {
    if (on_stream()) return call(work);
    std::mutex m;
    std::condition_variable cv;
    bool finished = false;
    Status result;
    post([&work] { return work(); },
         [&](const Status& s) {
           std::lock_guard<std::mutex> lock(m);
           result = s;
           finished = true;
           cv.notify_one();
         });
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return finished; });
    return result;
  }

 private:
  struct Item {
    std::function<Status()> work;
    std::function<void(const Status&)> done;
  };

  HostStream() {
    std::thread t([this] { loop(); });
    worker_id_ = t.get_id();
    t.detach();
  }

  static Status call(const std::function<Status()>& work) {
    try {
      return work();
    } catch (const std::exception& e) {
      return Status::Error("stream", e.what());
    }
  }

  void loop() {
    for (;;) {
      Item item;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [this] { return !queue_.empty(); });
        item = std::move(queue_.front());
        queue_.pop_front();
      }
      const Status s = call(item.work);
      if (item.done) item.done(s);
    }
  }

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Item> queue_;
  std::thread::id worker_id_;
};
#endif

// Runs f in stream order: on a GPU directly (it only queues work), in the emulator on the stream.
template <class F>
Status ordered(F&& f) {
#if defined(__CUDACC__)
  return f();
#else
  return HostStream::get().run(std::function<Status()>(std::forward<F>(f)));
#endif
}

}  // namespace

Status backend_stream(cudaStream_t* stream) {
  std::lock_guard<std::mutex> lock(state_mutex());
  DeviceState* s = nullptr;
  NF_TRY(current_state("backend_stream", &s));
  if (!s->has_stream) {
    NF_CUDA_TRY("backend_stream", cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
    s->has_stream = true;
  }
  *stream = s->stream;
  return Status::Ok();
}

// Grows a slot with cudaMalloc; when the device is out of memory, releases the allocator's idle
// blocks (outside the state mutex: the release runs in stream order) and tries once more, then
// fails with ERR_NF_CUDA_OOM (the slot is left empty, so the next call starts afresh).
Status workspace(int slot, size_t bytes, void** ptr) {
  NF_CHECK(slot >= 0 && slot < kWorkspaceSlots, "workspace", "slot out of range");
  int64_t released = -1;  // bytes the retry released (-1: not retried yet)
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(state_mutex());
      DeviceState* s = nullptr;
      NF_TRY(current_state("workspace", &s));
      if (s->scratch_bytes[slot] >= bytes) {
        *ptr = s->scratch[slot];
        return Status::Ok();
      }
      NF_CHECK(!s->has_stream || !is_capturing(s->stream), "workspace",
               "a scratch slot would grow during CUDA graph capture (run the step once uncaptured first)");
      ++s->scratch_generation;
      NF_CUDA_TRY("workspace", cudaFree(s->scratch[slot]));
      s->scratch[slot] = nullptr;
      s->scratch_bytes[slot] = 0;
      const cudaError_t e = cudaMalloc(&s->scratch[slot], bytes);
      if (e == cudaSuccess) {
        s->scratch_bytes[slot] = bytes;
        *ptr = s->scratch[slot];
        return Status::Ok();
      }
      s->scratch[slot] = nullptr;
      (void)cudaGetLastError();
      if (e != cudaErrorMemoryAllocation)
        return Status::Error("workspace", error_text(e, "cudaMalloc(&s->scratch[slot], bytes)",
                                                     __FILE__ ":" NF_CUDA_STRINGIFY(__LINE__)));
      if (released >= 0) return out_of_memory("workspace", bytes, bytes, released);
    }
    NF_TRY(release_idle(&released));
  }
}

Status release_workspace() {
  return ordered([] {
    std::lock_guard<std::mutex> lock(state_mutex());
    DeviceState* s = nullptr;
    NF_TRY(current_state("release_workspace", &s));
    ++s->scratch_generation;
    for (int i = 0; i < kWorkspaceSlots; ++i) {
      NF_CUDA_TRY("release_workspace", cudaFree(s->scratch[i]));
      s->scratch[i] = nullptr;
      s->scratch_bytes[i] = 0;
    }
    return Status::Ok();
  });
}

Status device_count(int* n) {
  NF_CUDA_TRY("device_count", cudaGetDeviceCount(n));
  return Status::Ok();
}

Status device_alloc(void** ptr, size_t bytes) {
  NF_CUDA_TRY("device_alloc", cudaMalloc(ptr, bytes));
  return Status::Ok();
}

Status device_free(void* ptr) {
  return ordered([ptr] {
    NF_CUDA_TRY("device_free", cudaFree(ptr));
    return Status::Ok();
  });
}

Status copy_to_device(void* dst, const void* src, size_t bytes) {
  return ordered([=] {
    cudaStream_t s;
    NF_TRY(backend_stream(&s));
    NF_CUDA_TRY("copy_to_device", cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s));
    return Status::Ok();
  });
}

Status copy_to_host(void* dst, const void* src, size_t bytes) {
  return ordered([=] {
    cudaStream_t s;
    NF_TRY(backend_stream(&s));
    NF_CUDA_TRY("copy_to_host", cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s));
    NF_CUDA_TRY("copy_to_host", cudaStreamSynchronize(s));
    return Status::Ok();
  });
}

Status copy_on_device(void* dst, const void* src, size_t bytes) {
  return ordered([=] {
    cudaStream_t s;
    NF_TRY(backend_stream(&s));
    NF_CUDA_TRY("copy_on_device", cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
    return Status::Ok();
  });
}

Status fill_bytes(void* dst, int value, size_t bytes) {
  return ordered([=] {
    cudaStream_t s;
    NF_TRY(backend_stream(&s));
    NF_CUDA_TRY("fill_bytes", cudaMemsetAsync(dst, value, bytes, s));
    return Status::Ok();
  });
}

Status fill_zero(void* dst, size_t bytes) {
  Status st = fill_bytes(dst, 0, bytes);
  if (!st.ok()) st.op = "fill_zero";
  return st;
}

Status synchronize() {
  return ordered([] {
    cudaStream_t s;
    NF_TRY(backend_stream(&s));
    NF_CUDA_TRY("synchronize", cudaStreamSynchronize(s));
    return Status::Ok();
  });
}

// ---- Stream-ordered host work ----------------------------------------------------------------
Status stream_run(const std::function<Status()>& work) { return ordered([&work] { return work(); }); }

#if defined(__CUDACC__)
namespace {
void CUDART_CB host_done(void* data) {
  auto* done = static_cast<std::function<void(const Status&)>*>(data);
  (*done)(Status::Ok());
  delete done;
}
}  // namespace
#endif

Status stream_run_async(std::function<Status()> work, std::function<void(const Status&)> done) {
#if defined(__CUDACC__)
  NF_TRY(work());
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  auto* callback = new std::function<void(const Status&)>(std::move(done));
  const cudaError_t e = cudaLaunchHostFunc(s, host_done, callback);
  if (e != cudaSuccess) {
    delete callback;
    return Status::Error("stream_run_async", error_text(e, "cudaLaunchHostFunc", __FILE__));
  }
  return Status::Ok();
#else
  HostStream::get().post(std::move(work), std::move(done));
  return Status::Ok();
#endif
}

// ---- The caching allocator -----------------------------------------------------------------------
namespace {

constexpr size_t kSmall = 4096, kSmallStep = 512;

int64_t limit_from_env() {
#if defined(__CUDACC__)
  constexpr int64_t kDefault = int64_t{8} << 30;
#else
  constexpr int64_t kDefault = int64_t{1} << 30;
#endif
  const char* v = std::getenv("NF_CUDA_CACHE_BYTES");
  if (!v || !*v) return kDefault;
  char* end = nullptr;
  const long long n = std::strtoll(v, &end, 10);
  return (end && *end == '\0' && n >= 0) ? n : kDefault;
}

// A CUDA graph's private pool: the blocks its capture was served (their capacities) and those of
// them that are idle now. Its blocks never reach the global cache while the graph lives.
struct Pool {
  std::unordered_map<void*, size_t> blocks;
  std::unordered_map<size_t, std::vector<void*>> idle;
};

struct Cache {
  std::mutex mutex;
  std::unordered_map<size_t, std::vector<void*>> idle;  // capacity -> idle blocks
  MemoryStats stats;
  Pool* capturing = nullptr;                 // the pool serving the capture in progress
  std::unordered_map<void*, Pool*> pooled;  // block -> the live graph pool that owns it

  Cache() { stats.limit_bytes = limit_from_env(); }

  // A block handed out during a capture joins the capture's pool. Holds the mutex.
  void adopt(void* p, size_t capacity) {
    if (!capturing) return;
    capturing->blocks[p] = capacity;
    pooled[p] = capturing;
    stats.graph_bytes += int64_t(capacity);
  }

  // Takes idle blocks out until cached_bytes <= target (the caller frees them). Holds the mutex.
  void take_over(int64_t target, std::vector<void*>* out) {
    for (auto it = idle.begin(); it != idle.end() && stats.cached_bytes > target;) {
      auto& blocks = it->second;
      while (!blocks.empty() && stats.cached_bytes > target) {
        out->push_back(blocks.back());
        blocks.pop_back();
        stats.cached_bytes -= int64_t(it->first);
        ++stats.released;
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

Status release_blocks(const std::vector<void*>& blocks) {
  if (blocks.empty()) return Status::Ok();
  return ordered([&blocks] {
    for (void* p : blocks) NF_CUDA_TRY("empty_cache", cudaFree(p));
    return Status::Ok();
  });
}

}  // namespace

size_t cached_block_capacity(size_t bytes) {
  if (bytes <= kSmall) return bytes == 0 ? kSmallStep : (bytes + kSmallStep - 1) / kSmallStep * kSmallStep;
  if (bytes > (SIZE_MAX >> 2)) return 0;
  const size_t octave = size_t{1} << (63 - __builtin_clzll(bytes));  // largest power of two <= bytes
  const size_t step = octave / 4;
  return (bytes + step - 1) / step * step;
}

Status cached_alloc(void** ptr, size_t bytes) {
  const size_t capacity = cached_block_capacity(bytes);
  NF_CHECK(capacity != 0, "device_alloc", "request of " + std::to_string(bytes) + " bytes is too large");
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    if (Pool* pool = c.capturing) {  // a capture: the pool's own idle block first
      auto own = pool->idle.find(capacity);
      if (own != pool->idle.end() && !own->second.empty()) {
        *ptr = own->second.back();
        own->second.pop_back();
        c.stats.live_bytes += int64_t(capacity);
        if (c.stats.live_bytes > c.stats.peak_live_bytes) c.stats.peak_live_bytes = c.stats.live_bytes;
        ++c.stats.reused;
        return Status::Ok();
      }
    }
    auto it = c.idle.find(capacity);
    if (it != c.idle.end() && !it->second.empty()) {
      *ptr = it->second.back();
      it->second.pop_back();
      c.stats.cached_bytes -= int64_t(capacity);
      c.stats.live_bytes += int64_t(capacity);
      if (c.stats.live_bytes > c.stats.peak_live_bytes) c.stats.peak_live_bytes = c.stats.live_bytes;
      ++c.stats.reused;
      c.adopt(*ptr, capacity);
      return Status::Ok();
    }
  }
  void* p = nullptr;
  int64_t released = -1;  // bytes the retry released (-1: not retried yet)
  for (;;) {
    const cudaError_t e = cudaMalloc(&p, capacity);
    if (e == cudaSuccess) break;
    (void)cudaGetLastError();  // (a failed allocation is not sticky; leave no error behind)
    if (e != cudaErrorMemoryAllocation)
      return Status::Error("device_alloc",
                           error_text(e, "cudaMalloc(&p, capacity)", __FILE__ ":" NF_CUDA_STRINGIFY(__LINE__)));
    if (released >= 0) return out_of_memory("device_alloc", bytes, capacity, released);
    NF_TRY(release_idle(&released));  // memory is short: give the idle blocks back, try once more
  }
  std::lock_guard<std::mutex> lock(c.mutex);
  c.stats.live_bytes += int64_t(capacity);
  if (c.stats.live_bytes > c.stats.peak_live_bytes) c.stats.peak_live_bytes = c.stats.live_bytes;
  ++c.stats.fresh;
  c.adopt(p, capacity);
  *ptr = p;
  return Status::Ok();
}

Status cached_free(void* ptr, size_t bytes) {
  if (!ptr) return Status::Ok();
  const size_t capacity = cached_block_capacity(bytes);
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    c.stats.live_bytes -= int64_t(capacity);
    if (auto owner = c.pooled.find(ptr); owner != c.pooled.end()) {  // a graph's block stays the graph's
      owner->second->idle[capacity].push_back(ptr);
      return Status::Ok();
    }
    // (During a capture nothing is released: cudaFree would wait for the device.)
    if (c.capturing || c.stats.cached_bytes + int64_t(capacity) <= c.stats.limit_bytes) {
      c.idle[capacity].push_back(ptr);
      c.stats.cached_bytes += int64_t(capacity);
      return Status::Ok();
    }
    ++c.stats.released;
  }
  return release_blocks({ptr});
}

MemoryStats memory_stats() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.stats;
}

Status empty_cache() {
  int64_t released = 0;
  return release_idle(&released);
}

namespace {

// "1.50 GiB", "12.0 MiB", "512 B": three significant digits in binary units.
std::string human_bytes(double bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (bytes >= 1024 && u < 5) {
    bytes /= 1024;
    ++u;
  }
  char text[32];
  if (u == 0) std::snprintf(text, sizeof text, "%.0f B", bytes);
  else if (bytes < 10) std::snprintf(text, sizeof text, "%.2f %s", bytes, units[u]);
  else if (bytes < 100) std::snprintf(text, sizeof text, "%.1f %s", bytes, units[u]);
  else std::snprintf(text, sizeof text, "%.0f %s", bytes, units[u]);
  return text;
}

Status release_idle(int64_t* released) {
  std::vector<void*> blocks;
  int64_t bytes = 0;
  {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    bytes = c.stats.cached_bytes;
    c.take_over(0, &blocks);
    bytes -= c.stats.cached_bytes;
  }
  *released = (*released < 0 ? 0 : *released) + bytes;
  return release_blocks(blocks);
}

Status out_of_memory(const char* op, size_t bytes, size_t block, int64_t released) {
  const MemoryStats s = memory_stats();
  std::string m = "CUDA out of memory (cudaErrorMemoryAllocation): cannot allocate " + human_bytes(double(bytes)) + " (" +
                  std::to_string(bytes) + " bytes" + (block != bytes ? ", a block of " + human_bytes(double(block)) : "") +
                  ") on the device; live tensors hold " + human_bytes(double(s.live_bytes)) + "; idle cached blocks: ";
  m += released > 0 ? human_bytes(double(released)) + " released before retrying" : "none to release";
  m += ", " + human_bytes(double(s.cached_bytes)) + " held now (cache limit " + human_bytes(double(s.limit_bytes)) +
       ", NF_CUDA_CACHE_BYTES)";
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess)
    m += "; the device has " + human_bytes(double(free_bytes)) + " free of " + human_bytes(double(total_bytes));
  else
    (void)cudaGetLastError();
  m += ". Dispose of tensors no longer needed, then try a smaller batch, cudaEmptyCache(), or "
       "NF_CUDA_CACHE_BYTES (a lower cap on idle cached memory)";
  return Status{op, std::move(m), "ERR_NF_CUDA_OOM"};
}

}  // namespace

// ---- CUDA graphs ------------------------------------------------------------------------------------
struct Graph {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  Pool* pool = nullptr;
  int64_t scratch_generation = 0;
};

namespace {

struct GraphState {
  std::mutex mutex;
  GraphStats stats;
};
GraphState& graph_state() {
  static GraphState* g = new GraphState();
  return *g;
}

int64_t scratch_generation() {
  std::lock_guard<std::mutex> lock(state_mutex());
  DeviceState* s = nullptr;
  return current_state("graph", &s).ok() ? s->scratch_generation : -1;
}

// Gives the pool's idle blocks to the global cache and disowns its live ones (they join the cache
// when their tensors free them); deletes the pool. Holds the cache's mutex.
void dissolve(Cache& c, Pool* pool) {
  for (auto& [capacity, blocks] : pool->idle)
    for (void* p : blocks) {
      c.idle[capacity].push_back(p);
      c.stats.cached_bytes += int64_t(capacity);
    }
  for (auto& [p, capacity] : pool->blocks) {
    c.pooled.erase(p);
    c.stats.graph_bytes -= int64_t(capacity);
  }
  if (c.capturing == pool) c.capturing = nullptr;
  delete pool;
}

}  // namespace

bool graph_capturing() {
  std::lock_guard<std::mutex> lock(cache().mutex);
  return cache().capturing != nullptr;
}

Status graph_begin() {
  return ordered([] {
    cudaStream_t s;
    NF_TRY(backend_stream(&s));
    Cache& c = cache();
    {
      std::lock_guard<std::mutex> lock(c.mutex);
      NF_CHECK(!c.capturing, "graph_begin", "a CUDA graph capture is already in progress");
      c.capturing = new Pool();
    }
    const cudaError_t e = cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed);
    if (e != cudaSuccess) {
      std::lock_guard<std::mutex> lock(c.mutex);
      dissolve(c, c.capturing);
      return Status::Error("graph_begin", error_text(e, "cudaStreamBeginCapture", __FILE__));
    }
    return Status::Ok();
  });
}

Status graph_end(Graph** out) {
  *out = nullptr;
  return ordered([out] {
    cudaStream_t s;
    NF_TRY(backend_stream(&s));
    Cache& c = cache();
    auto* g = new Graph();
    {
      std::lock_guard<std::mutex> lock(c.mutex);
      NF_CHECK(c.capturing, "graph_end", "no CUDA graph capture is in progress");
      g->pool = c.capturing;
      c.capturing = nullptr;
    }
    g->scratch_generation = scratch_generation();
    cudaError_t e = cudaStreamEndCapture(s, &g->graph);
    if (e == cudaSuccess) e = cudaGraphInstantiate(&g->exec, g->graph, 0);
    GraphState& gs = graph_state();
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      if (g->graph) (void)cudaGraphDestroy(g->graph);
      {
        std::lock_guard<std::mutex> lock(c.mutex);
        dissolve(c, g->pool);
      }
      delete g;
      std::lock_guard<std::mutex> lock(gs.mutex);
      ++gs.stats.failed;
      return Status::Error("graph_end", error_text(e, "cudaStreamEndCapture / cudaGraphInstantiate", __FILE__));
    }
    std::lock_guard<std::mutex> lock(gs.mutex);
    ++gs.stats.captures;
    ++gs.stats.live;
    *out = g;
    return Status::Ok();
  });
}

Status graph_launch(Graph* g) {
  NF_CHECK(g && g->exec, "graph_launch", "the CUDA graph was destroyed");
  return ordered([g] {
    if (!graph_fresh(g))
      return Status{"graph_launch", "a scratch buffer the CUDA graph uses has moved since its capture", "ERR_NF_GRAPH_STALE"};
    cudaStream_t s;
    NF_TRY(backend_stream(&s));
    NF_CUDA_TRY("graph_launch", cudaGraphLaunch(g->exec, s));
    GraphState& gs = graph_state();
    std::lock_guard<std::mutex> lock(gs.mutex);
    ++gs.stats.launches;
    return Status::Ok();
  });
}

bool graph_fresh(const Graph* g) { return g && scratch_generation() == g->scratch_generation; }

Status graph_destroy(Graph* g) {
  if (!g) return Status::Ok();
  return ordered([g] {
    // (The stream finishes the graph's last launch before the pool's blocks serve anyone else: later
    // work is queued behind it.)
    if (g->exec) NF_CUDA_TRY("graph_destroy", cudaGraphExecDestroy(g->exec));
    if (g->graph) NF_CUDA_TRY("graph_destroy", cudaGraphDestroy(g->graph));
    {
      std::lock_guard<std::mutex> lock(cache().mutex);
      dissolve(cache(), g->pool);
    }
    delete g;
    GraphState& gs = graph_state();
    std::lock_guard<std::mutex> lock(gs.mutex);
    --gs.stats.live;
    return Status::Ok();
  });
}

GraphStats graph_stats() {
  GraphState& gs = graph_state();
  std::lock_guard<std::mutex> lock(gs.mutex);
  return gs.stats;
}

Status set_cache_limit(int64_t bytes) {
  std::vector<void*> blocks;
  {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    c.stats.limit_bytes = bytes < 0 ? 0 : bytes;
    c.take_over(c.stats.limit_bytes, &blocks);
  }
  return release_blocks(blocks);
}

}  // namespace nf::cuda
