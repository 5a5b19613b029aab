// The CUDA backend's device layer: memory, copies and synchronisation on the backend's stream
// (one per device, created on first use), the caching allocator of tensor memory, and stream-ordered
// host work (what the addon's synchronous and asynchronous ops run through). Everything returns an
// nf::Status; a failing CUDA call becomes an error naming the call and its file:line. Pointers
// called "device" here are what the backend's ops take (in the emulator build, host memory standing
// in for the device's).
// Public: no CUDA types, so the binding and tests include it with a plain C++ compiler.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>

#include "../core/status.h"

namespace nf::cuda {

// Number of usable devices (an error, not 0, when the driver or runtime is missing).
Status device_count(int* n);

// Device memory of `bytes` (contents unspecified), and its release (null is fine). Uncached:
// cudaMalloc / cudaFree themselves (cudaFree waits for the device).
Status device_alloc(void** ptr, size_t bytes);
Status device_free(void* ptr);

// Copies on the backend's stream. copy_to_host waits for the copy (and all earlier work).
Status copy_to_device(void* dst, const void* src, size_t bytes);
Status copy_to_host(void* dst, const void* src, size_t bytes);
Status copy_on_device(void* dst, const void* src, size_t bytes);
Status fill_zero(void* dst, size_t bytes);
// Sets every byte to `value` (0xFF: NaN in every float32, the poison of uninitialized memory).
Status fill_bytes(void* dst, int value, size_t bytes);

// Waits for all work queued on the backend's stream.
Status synchronize();

// Frees the backend's cached scratch buffers (the stream stays).
Status release_workspace();

// ---- The caching allocator ---------------------------------------------------------------------
// Tensor memory (the addon's device buffers) comes from here. A freed block goes to a free list of
// its size class and serves the next request of that class, so a training loop that makes the same
// activations every step reuses last step's blocks: no cudaMalloc (which may synchronise the
// device) and no cudaFree (which always does) in the steady state. Reuse is safe without events
// because every op runs on the one backend stream: work queued before the free has finished reading
// the block before work queued after the next alloc writes it (the emulator keeps the same order,
// see stream_run). Size classes: 512-byte multiples up to 4 KiB, then four steps per power of two
// (2^k, 1.25, 1.5, 1.75 · 2^k), so a block wastes < 25%. Idle bytes are capped (NF_CUDA_CACHE_BYTES,
// default 8 GiB on a GPU, 1 GiB in the emulator; 0 disables caching): a freed block that would
// exceed the cap goes back to the device. Out of memory (cudaMalloc fails with
// cudaErrorMemoryAllocation), the idle blocks are released and the request tried once more, as
// torch's caching allocator does; failing again, the Status has code ERR_NF_CUDA_OOM and a message
// naming the request, the live bytes, the cached bytes released and still held, the cap, the
// device's free memory, and what to try. Nothing changes but the release: the counters stay
// consistent and the next (smaller) request may succeed. The backend's scratch buffers (workspace)
// grow the same way.
// One cache for the process (the backend uses the current device; multi-GPU is not supported here).
struct MemoryStats {
  int64_t live_bytes = 0;       // capacity of the blocks handed out and not yet freed
  int64_t peak_live_bytes = 0;  // the largest live_bytes so far
  int64_t cached_bytes = 0;     // capacity of the idle blocks kept for reuse
  int64_t limit_bytes = 0;      // the cap on cached_bytes
  int64_t fresh = 0;            // blocks obtained with cudaMalloc
  int64_t reused = 0;           // requests served from the cache
  int64_t released = 0;         // blocks given back with cudaFree (over the cap, empty_cache, out of memory)
  int64_t graph_bytes = 0;      // capacity of the blocks CUDA graphs' private pools own (live or idle)
};

// The capacity of the block that serves a request of `bytes` (0 when it overflows).
size_t cached_block_capacity(size_t bytes);
// A block of cached_block_capacity(bytes) bytes (contents unspecified: the last user's, or the
// emulator's 0xFF when fresh). Free it with cached_free and the same `bytes`. Out of device memory
// even after releasing the idle blocks: a Status with code "ERR_NF_CUDA_OOM" (see above).
Status cached_alloc(void** ptr, size_t bytes);
Status cached_free(void* ptr, size_t bytes);
MemoryStats memory_stats();
// Returns every idle block to the device (cudaFree).
Status empty_cache();
// Sets the cap on idle bytes (releasing idle blocks over it now); negative means 0.
Status set_cache_limit(int64_t bytes);

// ---- CUDA graphs -----------------------------------------------------------------------------------
// One step's work (the kernels, copies and fills an op sequence queues on the backend stream)
// captured once and replayed with one launch. graph_begin starts capturing the backend stream
// (cudaStreamCaptureModeRelaxed): from then on ops are recorded, not run, until graph_end, which
// instantiates the graph. While capturing, the caching allocator serves every request from the
// capture's private pool (an idle block of the pool, of the global cache, or a fresh cudaMalloc,
// which relaxed capture allows), and a block the pool owns goes back to the pool when freed, during
// or after the capture: the addresses the graph holds stay the graph's until graph_destroy, which
// hands the pool's idle blocks to the cache (blocks still held by tensors join the cache when freed).
// What cannot be captured fails the op with an error and makes graph_end fail with the first such
// reason: waiting for the stream or copying to the host (a loss read back mid-step, a host-side
// check of device values), cudaFree, growing a scratch slot. A graph also records the generation of
// the scratch slots (workspace); a slot regrown or released later makes graph_launch fail with code
// ERR_NF_GRAPH_STALE (the caller captures again). Everything runs in stream order (stream_run).
struct Graph;
struct GraphStats {
  int64_t captures = 0;  // graphs captured and instantiated
  int64_t failed = 0;    // captures that failed (graph_end's error)
  int64_t launches = 0;  // graph_launch calls that ran a graph
  int64_t live = 0;      // graphs not yet destroyed
};
Status graph_begin();
Status graph_end(Graph** graph);
Status graph_launch(Graph* graph);
// Whether no scratch slot has moved since the graph's capture (graph_launch would fail otherwise).
bool graph_fresh(const Graph* graph);
Status graph_destroy(Graph* graph);
// Whether the backend stream is capturing (ops that would wait for the stream check it).
bool graph_capturing();
GraphStats graph_stats();

// ---- Stream-ordered host work --------------------------------------------------------------------
// `work` queues kernels and copies on the backend stream (an op's job). On a GPU it runs on the
// calling thread and returns once its work is queued. In the emulator, where kernels run on the
// CPU, the backend stream is a worker thread: every piece of work (ops, copies, fills, frees) runs
// there in the order it was submitted, so the emulator keeps a GPU stream's ordering whatever
// thread submits; stream_run submits and waits (running inline when called from the stream itself).
Status stream_run(const std::function<Status()>& work);
// Submits `work` and returns at once; `done` is called with the outcome once the work and
// everything queued before it has finished, from another thread (GPU: a host callback on the
// stream, cudaLaunchHostFunc; emulator: the stream's worker thread). On a GPU an error while
// queueing is returned here and `done` is not called; `done` must not call CUDA.
Status stream_run_async(std::function<Status()> work, std::function<void(const Status&)> done);

}  // namespace nf::cuda
