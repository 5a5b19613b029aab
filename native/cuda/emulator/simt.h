// A SIMT emulator: the CUDA kernels of native/cuda compile as plain C++ against this header and
// run on the CPU, so they can be tested on machines without a GPU.
//
// Execution model. A launch runs its blocks one at a time, in order. The threads of a block run
// either as fibers on the calling thread (the default: deterministic and fast; switched by a few
// instructions on x86-64, by ucontext's swapcontext elsewhere, under a shadow stack, or with
// NF_EMU_UCONTEXT=1) or as OS threads (NF_EMU_THREADS=1 in the environment, or compiled with
// -DNF_EMU_OS_THREADS; forced under ThreadSanitizer, which then sees every shared-memory access the
// barriers do not order). A thread runs until it reaches __syncthreads, a warp operation
// (__syncwarp, __shfl_*_sync, votes) or its end. The fiber scheduler then prefers the other lanes
// of the same warp, so a warp runs ahead as a unit as on a GPU and a barrier missing between a
// read and the next write of the same shared memory shows; NF_EMU_REVERSE=1 takes warps and lanes
// in reverse order. A barrier completes when every thread that has not exited has reached it
// (threads that returned early are not waited for, as on sm_70+), a warp operation when every lane
// of its mask has reached it. A barrier or warp operation that can never complete (deadlock, a
// lane of the mask exited or missing, lanes disagreeing on the operation) fails the launch with a
// message, which cudaGetErrorString returns. A spin-wait on another thread of the same block never
// ends under fibers (they are not preempted).
//
// Shared memory. NF_SHARED(T, name) declares static shared storage, NF_DYNAMIC_SHARED(T, name)
// the launch's dynamic shared memory; both live in per-launch arenas that are filled with 0xFF
// bytes (NaN as float, -1 as int) at the start of every block, so a read that no barrier ordered
// after its write, or of memory no thread wrote, shows up as NaN in the results. The plain
// `__shared__` keyword also works (a static variable); GCC honours the ELF section that poisons it
// only outside templates, which is why kernels here use NF_SHARED. Limits are the smallest target's
// (sm_89): 48 KiB static, 99 KiB dynamic shared memory, 1024 threads per block.
//
// Checking barriers. Every __syncthreads is recorded by its source location, "file.cu:line"
// (barrier_sites()); with options().drop_barrier (or NF_EMU_DROP_BARRIER) set to one of them,
// threads pass that barrier without waiting: a test can remove each barrier in turn and prove that
// its kernel's results then go wrong, and a ThreadSanitizer build shows the race it leaves.
//
// Warp-level matrix instructions (the emulated side of ../mma.cuh). mma.sync (m16n8k16 bf16 and f16,
// m16n8k8 tf32; f32 accumulators) and ldmatrix (m8n8 .x1/.x2/.x4, with and without .trans) are
// warp operations like the shuffles: all 32 lanes of the warp must arrive (a lane that exited, one
// waiting elsewhere, lanes disagreeing on the instruction or its qualifiers, or a warp with fewer
// than 32 threads fail the launch), and the lane that completes the operation computes every lane's
// registers from the fragment layouts of the PTX ISA (mma_complete, ldmatrix_complete cite them).
// ldmatrix reads shared memory when the last lane arrives and checks each row address (16-byte
// aligned, inside shared memory). cp.async is a deferred copy, stricter than the hardware: at issue
// the destination bytes are poisoned (0xFF) and the source bytes captured; the data lands only when
// the thread's cp.async.wait_group (or wait_all) completes its group, or when the thread exits.
// So a read of the destination before the wait (its own thread) or before the wait and a barrier
// (other threads) sees NaN, as does a write of a buffer other warps are still reading.
//
// Device memory is host memory: cudaMalloc returns 0xFF-filled host allocations, copies are
// memcpy, streams and events exist but everything runs synchronously on the calling thread. Its
// capacity is unlimited (only a single request larger than the host's physical memory fails)
// unless options().device_bytes (NF_EMU_DEVICE_BYTES, a byte count) sets one: then a cudaMalloc
// that would take the bytes held by live allocations past it fails with cudaErrorMemoryAllocation,
// as a full GPU does, and cudaMemGetInfo reports that capacity (without one, the host's physical
// memory) and what is left of it — how out-of-memory handling is tested without a GPU.
// Fast-math intrinsics (__expf, rsqrtf, ...) are computed exactly.
#pragma once

#ifdef __CUDACC__
#error "the SIMT emulator is for host compilers; nvcc builds against the CUDA runtime"
#endif

#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <math.h>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

// ---------------------------------------------------------------------------------------------
// Qualifiers and built-in types
// ---------------------------------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __constant__ static
#ifdef __ELF__
#define __shared__ __attribute__((section("nf_emu_shared"))) static
#else
#define __shared__ static  // (no section to poison it by)
#endif

struct uint3 {
  unsigned x, y, z;
};
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct __align__(8) float2 {
  float x, y;
};
struct __align__(16) float4 {
  float x, y, z, w;
};
struct __align__(8) int2 {
  int x, y;
};
struct __align__(16) int4 {
  int x, y, z, w;
};
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline int2 make_int2(int x, int y) { return {x, y}; }
inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }

// ---------------------------------------------------------------------------------------------
// Runtime API types
// ---------------------------------------------------------------------------------------------
enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDeviceFunction = 98,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorIllegalState = 401,
  cudaErrorLaunchFailure = 719,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
};
typedef enum cudaError cudaError_t;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

enum cudaFuncAttribute {
  cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
};

struct CUgraph_st;
struct CUstream_st {
  CUgraph_st* capture = nullptr;  // the graph being captured (emulator/capture.h), or null
  bool invalidated = false;       // the capture met an operation it cannot record
};
typedef struct CUstream_st* cudaStream_t;
struct CUevent_st {
  std::chrono::steady_clock::time_point time;
  bool recorded = false;
};
typedef struct CUevent_st* cudaEvent_t;
#define cudaStreamNonBlocking 0x01

namespace nf::emu {

// Limits the emulator enforces: those of the smallest GPU the backend targets (sm_89: 99 KiB of
// shared memory per block, 48 KiB of it static).
constexpr unsigned kWarpSize = 32;
constexpr unsigned kMaxThreadsPerBlock = 1024;
constexpr size_t kMaxStaticShared = 48 * 1024;
constexpr size_t kMaxShared = 99 * 1024;

struct Options {
  bool os_threads = false;          // threads of a block as OS threads (else fibers)
  bool ucontext = false;            // fibers switched by swapcontext even where a faster way exists
  bool reverse = false;             // fibers start in reverse thread order (NF_EMU_REVERSE=1)
  bool poison = true;               // fill shared memory with 0xFF at every block start
  std::string drop_barrier;         // a __syncthreads to skip, "file.cu:line" (see barrier_sites)
  size_t stack_bytes = 256 * 1024;  // per fiber (NF_EMU_STACK_KB)
  size_t device_bytes = 0;          // capacity of device memory, 0 = unlimited (NF_EMU_DEVICE_BYTES)
};

namespace detail {

inline bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::strcmp(v, "0") != 0;
}

inline Options initial_options() {
  Options o;
#ifdef NF_EMU_OS_THREADS
  o.os_threads = true;
#endif
  if (env_flag("NF_EMU_THREADS")) o.os_threads = true;
  if (env_flag("NF_EMU_REVERSE")) o.reverse = true;
  if (env_flag("NF_EMU_UCONTEXT")) o.ucontext = true;
  if (const char* site = std::getenv("NF_EMU_DROP_BARRIER")) o.drop_barrier = site;
  if (const char* kb = std::getenv("NF_EMU_STACK_KB")) o.stack_bytes = size_t(std::atol(kb)) * 1024;
  if (const char* bytes = std::getenv("NF_EMU_DEVICE_BYTES")) {
    char* end = nullptr;
    const unsigned long long n = std::strtoull(bytes, &end, 10);
    if (*bytes && end && *end == '\0') o.device_bytes = size_t(n);  // (anything else: unlimited)
  }
  return o;
}

}  // namespace detail

// The emulator's settings; tests may change them between launches.
inline Options& options() {
  static Options o = detail::initial_options();
  return o;
}

namespace detail {

// Whether block threads are OS threads: as the options say, and always under TSan (which cannot
// follow fibers).
inline bool os_threads() {
#ifdef __SANITIZE_THREAD__
  return true;
#else
  return options().os_threads;
#endif
}

enum class WarpOp {
  sync, shfl_idx, shfl_up, shfl_down, shfl_xor, ballot, any, all,
  // Warp-level matrix instructions: always the whole warp (mask 0xffffffff); `arg` holds the
  // qualifiers (ldmatrix: .num | 16 for .trans), which every lane must give alike.
  mma_m16n8k16_bf16, mma_m16n8k16_f16, mma_m16n8k8_tf32, ldmatrix
};

inline bool is_matrix_op(WarpOp op) { return op >= WarpOp::mma_m16n8k16_bf16; }

inline const char* warp_op_name(WarpOp op) {
  switch (op) {
    case WarpOp::sync: return "__syncwarp";
    case WarpOp::shfl_idx: return "__shfl_sync";
    case WarpOp::shfl_up: return "__shfl_up_sync";
    case WarpOp::shfl_down: return "__shfl_down_sync";
    case WarpOp::shfl_xor: return "__shfl_xor_sync";
    case WarpOp::ballot: return "__ballot_sync";
    case WarpOp::any: return "__any_sync";
    case WarpOp::all: return "__all_sync";
    case WarpOp::mma_m16n8k16_bf16: return "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32";
    case WarpOp::mma_m16n8k16_f16: return "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32";
    case WarpOp::mma_m16n8k8_tf32: return "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32";
    default: return "ldmatrix.sync.aligned.m8n8";
  }
}

// Thrown into the threads of a failed block so they unwind.
struct Abort {};

// A cp.async issued and not yet landed: the bytes to write (captured from the source at issue,
// zero-filled past src-size) and the commit group it belongs to.
struct AsyncCopy {
  unsigned char* dst = nullptr;
  unsigned char bytes[16] = {};
  unsigned size = 0;
  unsigned group = 0;  // Thread::copy_groups when issued (== it while uncommitted)
};

struct Thread {
  uint3 idx{};
  unsigned linear = 0;
  enum class State { runnable, blocked, exited } state = State::runnable;
  bool at_barrier = false;
  bool in_warp_op = false;
  WarpOp op = WarpOp::sync;
  unsigned mask = 0;
  int arg = 0, width = 32;
  uint64_t value = 0, result = 0;
  const void* in = nullptr;  // a matrix operation's operands (on the lane's stack) ...
  void* out = nullptr;       // ... and where its results go
  std::vector<AsyncCopy> copies;  // cp.async in flight, oldest first
  unsigned copy_groups = 0;       // cp.async.commit_group calls so far
  unsigned barriers = 0, syncwarps = 0;  // passed so far (their parity picks the TSan sync object)
  char warp_sync[2] = {};                // lane 0's: the warp's TSan sync objects
  ucontext_t ctx{};    // the fiber's context (swapcontext) ...
  void* sp = nullptr;  // ... or its saved stack pointer (fast switch)
};

struct Block {
  std::vector<Thread> threads;
  unsigned live = 0;     // threads not exited
  unsigned arrived = 0;  // threads waiting at __syncthreads
  unsigned blocked = 0;  // threads waiting at a barrier or warp operation
  std::vector<unsigned> warp_runnable;  // runnable threads per warp (the fiber scheduler's index)
  bool failed = false;
  std::string error;
  char barrier_sync[2] = {};  // TSan sync objects of consecutive barriers
  std::mutex m;
  std::condition_variable cv;
  ucontext_t scheduler{};     // the launching thread's context (swapcontext) ...
  void* scheduler_sp = nullptr;  // ... or its saved stack pointer (fast switch)
  const std::function<void()>* body = nullptr;
};

// Shared-memory arenas of the current launch: static (NF_SHARED) and dynamic.
struct Launch {
  uint3 block_idx{};
  dim3 block_dim, grid_dim;
  std::vector<unsigned char> static_arena = std::vector<unsigned char>(kMaxStaticShared + 64);
  std::vector<unsigned char> dynamic_arena = std::vector<unsigned char>(kMaxShared + 64);
  std::vector<std::pair<const void*, size_t>> static_slots;  // declaration key -> arena offset
  size_t static_used = 0, dynamic_bytes = 0;
  Block* block = nullptr;
};

inline Launch& launch_state() {
  static Launch l;
  return l;
}
inline thread_local Thread* tls_thread = nullptr;

inline std::vector<std::string>& barrier_site_list() {
  static std::vector<std::string> sites;
  return sites;
}

// ThreadSanitizer must see the ordering CUDA guarantees (a barrier orders everything before it in
// every thread before everything after it; __syncwarp likewise within its lanes) and nothing more:
// the emulator's own mutex would otherwise order the threads at every bookkeeping step and hide
// the races a missing barrier causes. So under TSan the bookkeeping runs with synchronisation and
// memory accesses ignored, and barriers are declared to TSan as release (on arrival) / acquire (on
// departure) on sync objects that alternate between consecutive barriers.
#ifdef __SANITIZE_THREAD__
extern "C" {
void AnnotateHappensBefore(const char* file, int line, const volatile void* addr);
void AnnotateHappensAfter(const char* file, int line, const volatile void* addr);
void AnnotateIgnoreReadsBegin(const char* file, int line);
void AnnotateIgnoreReadsEnd(const char* file, int line);
void AnnotateIgnoreWritesBegin(const char* file, int line);
void AnnotateIgnoreWritesEnd(const char* file, int line);
void AnnotateIgnoreSyncBegin(const char* file, int line);
void AnnotateIgnoreSyncEnd(const char* file, int line);
}
inline void tsan_release(const void* sync) { AnnotateHappensBefore(__FILE__, __LINE__, sync); }
inline void tsan_acquire(const void* sync) { AnnotateHappensAfter(__FILE__, __LINE__, sync); }
inline void tsan_ignore_begin() {
  AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
  AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
  AnnotateIgnoreSyncBegin(__FILE__, __LINE__);
}
inline void tsan_ignore_end() {
  AnnotateIgnoreSyncEnd(__FILE__, __LINE__);
  AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
  AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
}
#else
inline void tsan_release(const void*) {}
inline void tsan_acquire(const void*) {}
inline void tsan_ignore_begin() {}
inline void tsan_ignore_end() {}
#endif

// Taken while the threads of one block touch the block's bookkeeping (OS-thread mode only:
// fibers never run at the same time, and a fiber must not hold it across a switch).
struct Guard {
  std::unique_lock<std::mutex> lock;
  explicit Guard(Block& b) {
    if (!os_threads()) return;
    tsan_ignore_begin();
    lock = std::unique_lock<std::mutex>(b.m);
  }
  ~Guard() {
    if (!lock.owns_lock()) return;
    lock.unlock();
    tsan_ignore_end();
  }
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;
};

// ---- Fiber switching ----------------------------------------------------------------------------
// The fast switch (x86-64) saves the resume address and rbp on the current stack, swaps stack
// pointers and jumps; every other register is declared clobbered, so the compiler saves what it
// needs around it. It steps over the red zone first. It cannot keep a CET shadow stack in step, so
// where one is active (and off x86-64) fibers use swapcontext, which can but costs a system call.
#if defined(__x86_64__) && defined(__linux__)
inline void fast_switch(void** save_sp, void* next_sp) {
  asm volatile(
      "subq $128, %%rsp\n\t"
      "leaq 1f(%%rip), %%rax\n\t"
      "pushq %%rax\n\t"
      "pushq %%rbp\n\t"
      "movq %%rsp, (%%rdi)\n\t"
      "movq %%rsi, %%rsp\n\t"
      "popq %%rbp\n\t"
      "popq %%rax\n\t"
      "jmpq *%%rax\n\t"
      "1:\n\t"
      "addq $128, %%rsp\n\t"
      : "+D"(save_sp), "+S"(next_sp)
      :
      : "rax", "rbx", "rcx", "rdx", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15", "xmm0", "xmm1", "xmm2",
        "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15",
#ifdef __AVX512F__
        "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "xmm26", "xmm27",
        "xmm28", "xmm29", "xmm30", "xmm31",
#endif
        "memory", "cc");
}

inline bool fast_switch_available() {
  static const bool ok = [] {
    unsigned long features = 0;  // ARCH_SHSTK_STATUS (Linux 6.6+): bit 0 = shadow stack enabled
    return !(syscall(SYS_arch_prctl, 0x5005, &features) == 0 && (features & 1));
  }();
  return ok;
}
#else
inline void fast_switch(void**, void*) {}
inline bool fast_switch_available() { return false; }
#endif

inline bool use_fast_switch() { return fast_switch_available() && !options().ucontext; }

inline unsigned char* align_up(unsigned char* p, size_t a) {
  return reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(p) + a - 1) & ~(uintptr_t(a) - 1));
}

// Marks the block failed (first message wins) and wakes everyone so they unwind.
inline void fail(Block& b, const std::string& why) {
  if (!b.failed) {
    b.failed = true;
    b.error = why;
  }
  if (os_threads()) b.cv.notify_all();
}

inline std::string describe_waiters(const Block& b) {
  unsigned at_barrier = 0, at_warp = 0;
  std::string first;
  for (const Thread& t : b.threads) {
    if (t.state == Thread::State::exited) continue;
    if (t.at_barrier) ++at_barrier;
    if (t.in_warp_op) {
      ++at_warp;
      if (first.empty())
        first = std::string(" (first: thread ") + std::to_string(t.linear) + " in " + warp_op_name(t.op) + ")";
    }
  }
  return std::to_string(at_barrier) + " thread(s) wait at __syncthreads and " + std::to_string(at_warp) +
         " at warp operations" + first;
}

void to_scheduler(Block& b, Thread& t);
bool matrix_op_complete(Block& b, unsigned base, WarpOp op, int arg);
// Lands the thread's cp.async of every committed group but the `keep_groups` most recent (~0u:
// every copy, committed or not).
void land_async_copies(Thread& t, unsigned keep_groups);

// Parks the calling thread until a barrier or warp operation releases it.
inline void park(Block& b, Guard& g, Thread& t) {
  if (b.failed) throw Abort{};
  if (b.blocked + 1 == b.live) {
    fail(b, "deadlock: " + describe_waiters(b));
    throw Abort{};
  }
  t.state = Thread::State::blocked;
  ++b.blocked;
  --b.warp_runnable[t.linear / kWarpSize];
  if (os_threads()) {
    b.cv.wait(g.lock, [&] { return t.state == Thread::State::runnable || b.failed; });
  } else {
    to_scheduler(b, t);
  }
  if (b.failed) throw Abort{};
}

inline void wake(Block& b, Thread& t) {
  if (t.state == Thread::State::blocked) {
    t.state = Thread::State::runnable;
    --b.blocked;
    ++b.warp_runnable[t.linear / kWarpSize];
  }
}

inline void release_barrier(Block& b) {
  for (Thread& t : b.threads)
    if (t.at_barrier) {
      t.at_barrier = false;
      wake(b, t);
    }
  b.arrived = 0;
  if (os_threads()) b.cv.notify_all();
}

// `where` is "path/file.cu:line"; sites are recorded as "file.cu:line".
inline void barrier(const char* where) {
  Thread& t = *tls_thread;
  Block& b = *launch_state().block;
  {
    Guard g(b);
    const char* slash = std::strrchr(where, '/');
    const char* site = slash ? slash + 1 : where;
    auto& sites = barrier_site_list();
    if (std::find(sites.begin(), sites.end(), site) == sites.end()) sites.emplace_back(site);
    if (options().drop_barrier == site) return;
  }
  const void* sync = &b.barrier_sync[t.barriers++ & 1];
  tsan_release(sync);
  {
    Guard g(b);
    t.at_barrier = true;
    if (++b.arrived == b.live) release_barrier(b);
    else park(b, g, t);
  }
  tsan_acquire(sync);
}

// The value lane `lane` receives when its warp operation completes.
inline uint64_t lane_result(Block& b, unsigned base, unsigned lane, bool* ok) {
  const Thread& t = b.threads[base + lane];
  const unsigned w = unsigned(t.width), seg = lane & ~(w - 1);
  unsigned src = lane;
  switch (t.op) {
    case WarpOp::shfl_idx: src = seg + (unsigned(t.arg) & (w - 1)); break;
    case WarpOp::shfl_up: src = (lane - seg) >= unsigned(t.arg) ? lane - unsigned(t.arg) : lane; break;
    case WarpOp::shfl_down: src = (lane - seg) + unsigned(t.arg) < w ? lane + unsigned(t.arg) : lane; break;
    case WarpOp::shfl_xor: src = lane ^ unsigned(t.arg); if (src >= seg + w) src = lane; break;
    case WarpOp::ballot:
    case WarpOp::any:
    case WarpOp::all: {
      uint64_t ballot = 0;
      for (unsigned l = 0; l < kWarpSize; ++l)
        if ((t.mask >> l) & 1u) ballot |= uint64_t(b.threads[base + l].value != 0) << l;
      if (t.op == WarpOp::ballot) return ballot;
      if (t.op == WarpOp::any) return ballot != 0;
      return ballot == t.mask;
    }
    default: return 0;
  }
  if (!((t.mask >> src) & 1u)) {
    fail(b, std::string(warp_op_name(t.op)) + ": lane " + std::to_string(lane) + " reads lane " +
                 std::to_string(src) + ", which is not in the mask");
    *ok = false;
    return 0;
  }
  return b.threads[base + src].value;
}

inline uint64_t warp_op_locked(Block& b, Guard& g, Thread& t, WarpOp op, unsigned mask, uint64_t value, int arg, int width);

inline uint64_t warp_op(WarpOp op, unsigned mask, uint64_t value, int arg, int width) {
  Thread& t = *tls_thread;
  Block& b = *launch_state().block;
  if (op != WarpOp::sync) {
    Guard g(b);
    return warp_op_locked(b, g, t, op, mask, value, arg, width);
  }
  // __syncwarp orders memory among its lanes (declared to TSan on the warp's first thread).
  const void* sync = &b.threads[t.linear - t.linear % kWarpSize].warp_sync[t.syncwarps++ & 1];
  tsan_release(sync);
  {
    Guard g(b);
    warp_op_locked(b, g, t, op, mask, value, arg, width);
  }
  tsan_acquire(sync);
  return 0;
}

inline uint64_t warp_op_locked(Block& b, Guard& g, Thread& t, WarpOp op, unsigned mask, uint64_t value, int arg,
                               int width) {
  if (b.failed) throw Abort{};
  const unsigned lane = t.linear % kWarpSize, base = t.linear - lane;
  const unsigned lanes = std::min<unsigned>(kWarpSize, unsigned(b.threads.size()) - base);
  const unsigned existing = lanes == 32 ? 0xffffffffu : (1u << lanes) - 1;
  if (!((mask >> lane) & 1u)) fail(b, std::string(warp_op_name(op)) + ": calling lane " + std::to_string(lane) + " is not in its mask");
  else if (mask & ~existing) fail(b, std::string(warp_op_name(op)) + ": the mask names lanes beyond the block's last thread");
  else if (width < 1 || width > 32 || (width & (width - 1))) fail(b, std::string(warp_op_name(op)) + ": width must be a power of 2 up to 32");
  if (b.failed) throw Abort{};
  t.in_warp_op = true;
  t.op = op;
  t.mask = mask;
  t.value = value;
  t.arg = arg;
  t.width = width;
  bool complete = true;
  for (unsigned l = 0; l < lanes; ++l) {
    if (!((mask >> l) & 1u)) continue;
    const Thread& o = b.threads[base + l];
    if (o.state == Thread::State::exited) {
      fail(b, std::string(warp_op_name(op)) + ": lane " + std::to_string(l) + " of the mask has exited");
      throw Abort{};
    }
    if (!o.in_warp_op || o.mask != mask) {  // not there yet, or still in an operation of another group
      complete = false;
      continue;
    }
    if (o.op != op || o.width != width || (is_matrix_op(op) && o.arg != arg)) {
      fail(b, std::string("lanes of warp ") + std::to_string(base / 32) + " disagree: " + warp_op_name(op) +
                  (is_matrix_op(op) ? " (qualifiers " + std::to_string(arg) + ")" : "") + " vs " +
                  warp_op_name(o.op) + (is_matrix_op(o.op) ? " (qualifiers " + std::to_string(o.arg) + ")" : "") +
                  (is_matrix_op(op) ? "" : " (or different widths)"));
      throw Abort{};
    }
  }
  if (!complete) {
    park(b, g, t);
    return t.result;
  }
  bool ok = true;
  uint64_t results[kWarpSize] = {};
  if (is_matrix_op(op)) ok = matrix_op_complete(b, base, op, arg);
  else
    for (unsigned l = 0; l < lanes; ++l)
      if ((mask >> l) & 1u) results[l] = lane_result(b, base, l, &ok);
  if (!ok) throw Abort{};
  for (unsigned l = 0; l < lanes; ++l)
    if ((mask >> l) & 1u) {
      Thread& o = b.threads[base + l];
      o.result = results[l];
      o.in_warp_op = false;
      if (&o != &t) wake(b, o);
    }
  if (os_threads()) b.cv.notify_all();
  return t.result;
}

// A thread returned from the kernel: later barriers stop waiting for it.
inline void thread_exit(Block& b, Thread& t) {
  tsan_release(&b.barrier_sync[0]);
  tsan_release(&b.barrier_sync[1]);
  Guard g(b);
  t.state = Thread::State::exited;
  --b.live;
  --b.warp_runnable[t.linear / kWarpSize];
  if (b.failed || b.live == 0) return;
  const unsigned lane = t.linear % kWarpSize, base = t.linear - lane;
  for (unsigned l = 0; l < kWarpSize && base + l < b.threads.size(); ++l) {
    const Thread& o = b.threads[base + l];
    if (o.in_warp_op && ((o.mask >> lane) & 1u)) {
      fail(b, std::string(warp_op_name(o.op)) + ": lane " + std::to_string(lane) + " of the mask has exited");
      return;
    }
  }
  if (b.arrived > 0 && b.arrived == b.live) release_barrier(b);
  else if (b.blocked == b.live) fail(b, "deadlock: " + describe_waiters(b));
}

inline void run_thread_body(Block& b, Thread& t) {
  try {
    (*b.body)();
    land_async_copies(t, ~0u);  // cp.async never waited for still land (as on the GPU, eventually)
  } catch (Abort&) {
  }
  thread_exit(b, t);
}

inline void to_scheduler(Block& b, Thread& t) {
  if (use_fast_switch()) fast_switch(&t.sp, b.scheduler_sp);
  else swapcontext(&t.ctx, &b.scheduler);
}

inline void to_fiber(Block& b, Thread& t) {
  if (use_fast_switch()) fast_switch(&b.scheduler_sp, t.sp);
  else swapcontext(&b.scheduler, &t.ctx);
}

inline void fiber_entry() {
  Thread& t = *tls_thread;
  Block& b = *launch_state().block;
  run_thread_body(b, t);
  to_scheduler(b, t);  // never resumed
}

// Fiber stacks, kept for the next blocks and launches; the lowest page of each is a guard.
inline std::vector<void*>& stack_pool() {
  static std::vector<void*> pool;
  return pool;
}
inline size_t& stack_pool_bytes() {
  static size_t bytes = 0;
  return bytes;
}

inline bool ensure_stacks(size_t n) {
  auto& pool = stack_pool();
  const size_t bytes = options().stack_bytes;
  if (stack_pool_bytes() != bytes) {
    for (void* s : pool) munmap(s, stack_pool_bytes());
    pool.clear();
    stack_pool_bytes() = bytes;
  }
  while (pool.size() < n) {
    void* s = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (s == MAP_FAILED) return false;
    mprotect(s, 4096, PROT_NONE);
    pool.push_back(s);
  }
  return true;
}

// A fiber that starts in fiber_entry on `stack`. For the fast switch, the stack is laid out as
// fast_switch leaves a suspended one: rbp (0), then the resume address, here fiber_entry, entered
// with the stack aligned as after a call (whose return address, 0, it never uses).
// (Out of line: getcontext returns twice, which would make the caller's locals suspect.)
__attribute__((noinline)) inline void init_fiber(Thread& t, void* stack) {
  if (use_fast_switch()) {
    uintptr_t top = (reinterpret_cast<uintptr_t>(stack) + options().stack_bytes) & ~uintptr_t(15);
    void** sp = reinterpret_cast<void**>(top);
    *--sp = nullptr;                                  // fiber_entry's return address
    *--sp = reinterpret_cast<void*>(&fiber_entry);    // where the first switch jumps
    *--sp = nullptr;                                  // rbp
    t.sp = sp;
    return;
  }
  getcontext(&t.ctx);
  t.ctx.uc_stack.ss_sp = stack;
  t.ctx.uc_stack.ss_size = options().stack_bytes;
  t.ctx.uc_link = nullptr;
  makecontext(&t.ctx, fiber_entry, 0);
}

extern "C" {
extern char __start_nf_emu_shared[] __attribute__((weak));
extern char __stop_nf_emu_shared[] __attribute__((weak));
}

inline void poison_shared(Launch& l) {
  if (!options().poison) return;
  std::memset(l.static_arena.data(), 0xff, l.static_arena.size());
  std::memset(l.dynamic_arena.data(), 0xff, l.dynamic_arena.size());
  if (__start_nf_emu_shared && __stop_nf_emu_shared)
    std::memset(__start_nf_emu_shared, 0xff, size_t(__stop_nf_emu_shared - __start_nf_emu_shared));
}

// The fiber to run next: a runnable lane of `*warp` (the warp that ran last), else of the first warp
// with one (in reverse order under options().reverse); null when none is runnable.
inline Thread* next_fiber(Block& b, unsigned* warp) {
  const unsigned warps = unsigned(b.warp_runnable.size()), n = unsigned(b.threads.size());
  const bool rev = options().reverse;
  if (b.warp_runnable[*warp] == 0) {
    unsigned k = 0;
    for (; k < warps; ++k)
      if (b.warp_runnable[rev ? warps - 1 - k : k] > 0) break;
    if (k == warps) return nullptr;
    *warp = rev ? warps - 1 - k : k;
  }
  const unsigned base = *warp * kWarpSize, lanes = std::min(kWarpSize, n - base);
  for (unsigned l = 0; l < lanes; ++l) {
    Thread& t = b.threads[base + (rev ? lanes - 1 - l : l)];
    if (t.state == Thread::State::runnable) return &t;
  }
  return nullptr;  // unreachable: the count said one is runnable
}

// Runs one block; returns false (with the message in `error`) when it failed.
inline bool run_block(Launch& l, const std::function<void()>& body, std::string* error) {
  const unsigned n = l.block_dim.x * l.block_dim.y * l.block_dim.z;
  Block b;
  b.threads.resize(n);
  b.live = n;
  for (unsigned w = 0; w * kWarpSize < n; ++w) b.warp_runnable.push_back(std::min(kWarpSize, n - w * kWarpSize));
  b.body = &body;
  for (unsigned i = 0; i < n; ++i) {
    Thread& t = b.threads[i];
    t.linear = i;
    t.idx = {i % l.block_dim.x, (i / l.block_dim.x) % l.block_dim.y, i / (l.block_dim.x * l.block_dim.y)};
  }
  l.block = &b;
  poison_shared(l);
  if (os_threads()) {
    std::vector<std::thread> pool;
    pool.reserve(n);
    for (unsigned i = 0; i < n; ++i)
      pool.emplace_back([&b, i] {
        tls_thread = &b.threads[i];
        run_thread_body(b, b.threads[i]);
      });
    for (auto& th : pool) th.join();
  } else {
    if (!ensure_stacks(n)) {
      *error = "out of memory for fiber stacks";
      return false;
    }
    for (unsigned i = 0; i < n; ++i) init_fiber(b.threads[i], stack_pool()[i]);
    Thread* saved = tls_thread;
    unsigned warp = options().reverse ? unsigned(b.warp_runnable.size()) - 1 : 0;
    while (b.live > 0 && !b.failed) {
      Thread* next = next_fiber(b, &warp);
      if (!next) {
        fail(b, "deadlock: " + describe_waiters(b));
        break;
      }
      tls_thread = next;
      to_fiber(b, *next);
    }
    tls_thread = saved;
  }
  l.block = nullptr;
  if (b.failed) *error = b.error;
  return !b.failed;
}

inline std::string& last_launch_error() {
  static std::string e;
  return e;
}
inline thread_local cudaError_t tls_last_error = cudaSuccess;

inline cudaError_t set_error(cudaError_t e) {
  if (e != cudaSuccess) tls_last_error = e;
  return e;
}

inline std::mutex& launch_mutex() {
  static std::mutex m;
  return m;
}

// cudaErrorInvalidConfiguration (with its explanation) for a launch configuration no GPU accepts.
inline cudaError_t check_config(dim3 grid, dim3 block, size_t smem) {
  const uint64_t threads = uint64_t(block.x) * block.y * block.z;
  if (threads == 0 || threads > kMaxThreadsPerBlock || block.z > 64 || grid.x == 0 || grid.y == 0 ||
      grid.z == 0 || grid.y > 65535 || grid.z > 65535 || smem > kMaxShared) {
    last_launch_error() = "invalid launch configuration: grid (" + std::to_string(grid.x) + "," +
                          std::to_string(grid.y) + "," + std::to_string(grid.z) + "), block (" +
                          std::to_string(block.x) + "," + std::to_string(block.y) + "," + std::to_string(block.z) +
                          "), " + std::to_string(smem) + " bytes of dynamic shared memory";
    return set_error(cudaErrorInvalidConfiguration);
  }
  return cudaSuccess;
}

// Kernel grids run since the process started (each launch, and each kernel node of a graph replay):
// what a test counts to check an op's launches.
inline int64_t& grids_run_ref() {
  static int64_t n = 0;
  return n;
}

inline cudaError_t run_grid(dim3 grid, dim3 block, size_t smem, const std::function<void()>& body) {
  if (const cudaError_t e = check_config(grid, block, smem); e != cudaSuccess) return e;
  std::lock_guard<std::mutex> lock(launch_mutex());
  ++grids_run_ref();
  Launch& l = launch_state();
  l.block_dim = block;
  l.grid_dim = grid;
  l.dynamic_bytes = smem;
  l.static_slots.clear();
  l.static_used = 0;
  std::string error;
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        l.block_idx = {x, y, z};
        if (!run_block(l, body, &error)) {
          last_launch_error() = "block (" + std::to_string(x) + "," + std::to_string(y) + "," + std::to_string(z) +
                                "): " + error;
          return set_error(cudaErrorLaunchFailure);
        }
      }
  return cudaSuccess;
}

// The storage of one NF_SHARED declaration (keyed by a static variable of the declaration).
inline void* static_shared(const void* key, size_t bytes, size_t align) {
  Launch& l = launch_state();
  Guard g(*l.block);
  unsigned char* base = l.static_arena.data();
  for (auto& [k, offset] : l.static_slots)
    if (k == key) return base + offset;
  unsigned char* p = align_up(base + l.static_used, align < 16 ? 16 : align);
  const size_t offset = size_t(p - base);
  if (offset + bytes > kMaxStaticShared) {
    fail(*l.block, "static shared memory exceeds " + std::to_string(kMaxStaticShared) + " bytes");
    throw Abort{};
  }
  l.static_slots.emplace_back(key, offset);
  l.static_used = offset + bytes;
  return p;
}

inline void* dynamic_shared() { return align_up(launch_state().dynamic_arena.data(), 16); }

// ---- Warp-level matrix instructions and cp.async ----------------------------------------------

// Whether [p, p + bytes) lies in this launch's shared memory: the static (NF_SHARED) storage
// declared so far, the dynamic shared memory the launch asked for, or the poisoned `__shared__`
// section.
inline bool in_shared(const void* p, size_t bytes) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto inside = [&](const void* lo, size_t n) {
    const uintptr_t l = reinterpret_cast<uintptr_t>(lo);
    return a >= l && a + bytes <= l + n;
  };
  Launch& l = launch_state();
  if (inside(l.static_arena.data(), l.static_used) || inside(dynamic_shared(), l.dynamic_bytes)) return true;
  return __start_nf_emu_shared && __stop_nf_emu_shared &&
         inside(__start_nf_emu_shared, size_t(__stop_nf_emu_shared - __start_nf_emu_shared));
}

// Widening of the 16-bit inputs of mma (exact): bf16 is the upper half of a float; f16 (IEEE
// binary16) has 5 exponent and 10 mantissa bits.
inline float bf16_to_float(uint32_t bits) {
  const uint32_t u = (bits & 0xffffu) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline float f16_to_float(uint32_t bits) {
  const uint32_t sign = (bits & 0x8000u) << 16, exp = (bits >> 10) & 0x1fu, mant = bits & 0x3ffu;
  uint32_t u;
  if (exp == 0x1f) u = sign | 0x7f800000u | (mant << 13);                         // inf, NaN
  else if (exp != 0) u = sign | ((exp + 112) << 23) | (mant << 13);              // normal
  else return (sign ? -1.0f : 1.0f) * std::ldexp(float(mant), -24);             // zero, subnormal
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// A .tf32 operand as sm_80/sm_90 tensor cores read an fp32 register: the low 13 mantissa bits are
// ignored (truncation toward zero to 1 + 8 + 10 bits). The PTX ISA leaves the layout of tf32 data
// in a .b32 register implementation-defined and expects cvt.rna.tf32.f32 to produce it
// ("Alternate Floating-Point Data Formats"); the truncation of raw fp32 bits is what the hardware
// does (CUTLASS's NumericConverterFastF32 relies on it for its round_toward_zero "big" part) and
// what the emulator does. nf::cuda::to_tf32 (../mma.cuh) rounds first.
inline float tf32_operand(uint32_t bits) {
  const uint32_t u = bits & 0xffffe000u;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct MmaOperands {
  uint32_t a[4];
  uint32_t b[2];
  float c[4];
};

// D = A·B + C for one warp, every lane's registers in and out. Fragment layouts: PTX ISA (9.0),
// section 9.7.14.5.8 "Matrix Fragments for mma.m16n8k16 with floating point type" (.f16/.bf16 A,
// B and .f32 C/D) and section 9.7.14.5.7 "Matrix Fragments for mma.m16n8k8" (.tf32 A, B, C/D): the
// row/column formulas below are the ISA's, with groupID = laneid >> 2, threadID_in_group =
// laneid % 4, and the elements of a .f16x2/.bf16x2 register listed low half first. Cross-checked
// with CUTLASS's CuTe traits (include/cute/atom/mma_traits_sm80.hpp: SM80_16x8x16_F32BF16BF16F32_TN,
// SM80_16x8x8_F32TF32TF32F32_TN, SM80_16x8_Row). A is M×K row-major ("row"), B is K×N taken column
// by column ("col").
// Arithmetic: inputs widened exactly to fp32 (tf32: truncated, see tf32_operand); each product is
// exact in fp32 (at most 11 × 11 significant bits). The PTX ISA does not specify the order of the
// sums or their intermediate precision; here, in a fixed order, D[m][n] = C[m][n] then, for
// k = 0, 1, ..., K-1 in turn, D[m][n] = fmaf(A[m][k], B[k][n], D[m][n]) (one fp32 rounding a step).
inline void mma_complete(Block& b, unsigned base, WarpOp op) {
  const bool tf32 = op == WarpOp::mma_m16n8k8_tf32;
  const int K = tf32 ? 8 : 16;
  const float nan = std::nanf("");
  float A[16][16], B[16][8], C[16][8];
  for (auto& r : A) std::fill(r, r + 16, nan);  // a layout that missed an element would show as NaN
  for (auto& r : B) std::fill(r, r + 8, nan);
  for (auto& r : C) std::fill(r, r + 8, nan);
  auto widen = [&](uint32_t reg, int half) {
    const uint32_t bits = reg >> (16 * half);
    return op == WarpOp::mma_m16n8k16_bf16 ? bf16_to_float(bits) : f16_to_float(bits);
  };
  for (unsigned lane = 0; lane < kWarpSize; ++lane) {
    const MmaOperands& in = *static_cast<const MmaOperands*>(b.threads[base + lane].in);
    const int group = int(lane >> 2), tig = int(lane % 4);  // groupID, threadID_in_group
    if (!tf32) {
      for (int i = 0; i < 8; ++i) {  // a0..a7: a(2r), a(2r+1) in register r
        const int row = (i < 2 || (i >= 4 && i < 6)) ? group : group + 8;
        const int col = tig * 2 + (i & 1) + (i >= 4 ? 8 : 0);
        A[row][col] = widen(in.a[i / 2], i & 1);
      }
      for (int i = 0; i < 4; ++i) {  // b0..b3: b(2r), b(2r+1) in register r
        const int row = tig * 2 + (i & 1) + (i >= 2 ? 8 : 0);
        B[row][group] = widen(in.b[i / 2], i & 1);
      }
    } else {
      for (int i = 0; i < 4; ++i) {  // a0..a3, one per register
        const int row = (i == 0 || i == 2) ? group : group + 8;
        const int col = i < 2 ? tig : tig + 4;
        A[row][col] = tf32_operand(in.a[i]);
      }
      for (int i = 0; i < 2; ++i) B[tig + 4 * i][group] = tf32_operand(in.b[i]);  // b0, b1
    }
    for (int i = 0; i < 4; ++i) C[i < 2 ? group : group + 8][tig * 2 + (i & 1)] = in.c[i];  // c0..c3
  }
  float D[16][8];
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 8; ++n) {
      float acc = C[m][n];
      for (int k = 0; k < K; ++k) acc = std::fmaf(A[m][k], B[k][n], acc);
      D[m][n] = acc;
    }
  for (unsigned lane = 0; lane < kWarpSize; ++lane) {  // d0..d3 as c0..c3
    float* out = static_cast<float*>(b.threads[base + lane].out);
    const int group = int(lane >> 2), tig = int(lane % 4);
    for (int i = 0; i < 4; ++i) out[i] = D[i < 2 ? group : group + 8][tig * 2 + (i & 1)];
  }
}

// ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}.shared.b16 for one warp, when its last lane arrives.
// Layout: PTX ISA (9.0), "Warp-level matrix load instruction: ldmatrix": the rows of
// matrix i (8 rows of 8 16-bit elements, 16 bytes each, "naturally aligned") start at the addresses
// given by lanes 8i .. 8i+7 (so .x1 reads lanes 0-7, .x2 lanes 0-15, .x4 all 32; the other lanes'
// addresses are not used); lane l receives in register r[i] row l/4, elements 2(l%4) (low half) and
// 2(l%4)+1 (high half) of matrix i ("a group of four threads loads an entire row"); with .trans the
// matrix is read column-major, so lane l receives column l/4, rows 2(l%4) and 2(l%4)+1. Cross-checked
// with CuTe's copy traits (include/cute/atom/copy_traits_sm75.hpp: SM75_U32x{1,2,4}_LDSM_N,
// SM75_U16x{2,4,8}_LDSM_T).
inline bool ldmatrix_complete(Block& b, unsigned base, int arg) {
  const int num = arg & 7;
  const bool trans = (arg & 16) != 0;
  const unsigned char* row[32] = {};
  for (int l = 0; l < 8 * num; ++l) {
    row[l] = reinterpret_cast<const unsigned char*>(uintptr_t(b.threads[base + unsigned(l)].value));
    std::string why;
    if (reinterpret_cast<uintptr_t>(row[l]) % 16) why = "is not 16-byte aligned";
    else if (!in_shared(row[l], 16)) why = "is not in shared memory (NF_SHARED / NF_DYNAMIC_SHARED)";
    if (!why.empty()) {
      char addr[32];
      std::snprintf(addr, sizeof addr, "%p", static_cast<const void*>(row[l]));
      fail(b, std::string("ldmatrix: lane ") + std::to_string(l) + "'s row address " + addr + " " + why);
      return false;
    }
  }
  auto element = [&](int matrix, int r, int c) {  // 16-bit element (r, c) of a matrix
    uint16_t v;
    std::memcpy(&v, row[8 * matrix + r] + 2 * c, 2);
    return uint32_t(v);
  };
  // The shared-memory reads are the warp's own: ThreadSanitizer sees them (as the completing
  // thread's); the hand-over of the registers to the other lanes is bookkeeping, which it does not.
  uint32_t results[kWarpSize][4];
  if (os_threads()) tsan_ignore_end();
  for (unsigned lane = 0; lane < kWarpSize; ++lane) {
    const int group = int(lane >> 2), tig = int(lane % 4);
    for (int i = 0; i < num; ++i)
      results[lane][i] = trans ? element(i, 2 * tig, group) | element(i, 2 * tig + 1, group) << 16
                               : element(i, group, 2 * tig) | element(i, group, 2 * tig + 1) << 16;
  }
  if (os_threads()) tsan_ignore_begin();
  for (unsigned lane = 0; lane < kWarpSize; ++lane)
    std::memcpy(b.threads[base + lane].out, results[lane], sizeof(uint32_t) * size_t(num));
  return true;
}

inline bool matrix_op_complete(Block& b, unsigned base, WarpOp op, int arg) {
  if (op == WarpOp::ldmatrix) return ldmatrix_complete(b, base, arg);
  mma_complete(b, base, op);
  return true;
}

// The calling lane's part of a matrix operation of its warp (the whole warp, which must be full).
inline void matrix_warp_op(WarpOp op, int arg, uint64_t value, const void* in, void* out) {
  Thread& t = *tls_thread;
  Block& b = *launch_state().block;
  Guard g(b);
  if (b.failed) throw Abort{};
  const unsigned base = t.linear - t.linear % kWarpSize;
  const unsigned lanes = std::min<unsigned>(kWarpSize, unsigned(b.threads.size()) - base);
  if (lanes < kWarpSize) {
    fail(b, std::string(warp_op_name(op)) + ": warp " + std::to_string(base / kWarpSize) + " has " +
                std::to_string(lanes) + " threads; the instruction needs all 32 lanes");
    throw Abort{};
  }
  t.in = in;
  t.out = out;
  warp_op_locked(b, g, t, op, 0xffffffffu, value, arg, int(kWarpSize));
}

inline void land_async_copies(Thread& t, unsigned keep_groups) {
  size_t kept = 0;
  for (size_t i = 0; i < t.copies.size(); ++i) {
    const AsyncCopy& c = t.copies[i];
    if (keep_groups == ~0u || uint64_t(c.group) + keep_groups < t.copy_groups) std::memcpy(c.dst, c.bytes, c.size);
    else t.copies[kept++] = c;
  }
  t.copies.resize(kept);
}

inline void cp_async(void* dst, const void* src, unsigned cp_size, unsigned src_size, bool cg) {
  Thread& t = *tls_thread;
  Block& b = *launch_state().block;
  {
    Guard g(b);
    std::string why;
    if (cp_size != 4 && cp_size != 8 && cp_size != 16) why = "cp-size must be 4, 8 or 16";
    else if (cg && cp_size != 16) why = ".cg copies 16 bytes";
    else if (src_size > cp_size) why = "src-size exceeds cp-size";
    else if (reinterpret_cast<uintptr_t>(dst) % cp_size) why = "the destination is not aligned to cp-size";
    else if (reinterpret_cast<uintptr_t>(src) % cp_size) why = "the source is not aligned to cp-size";
    else if (!in_shared(dst, cp_size)) why = "the destination is not in shared memory (NF_SHARED / NF_DYNAMIC_SHARED)";
    else if (src_size && in_shared(src, src_size)) why = "the source is in shared memory (cp.async copies from global)";
    if (b.failed) throw Abort{};
    if (!why.empty()) {
      fail(b, std::string(cg ? "cp.async.cg" : "cp.async.ca") + ": thread " + std::to_string(t.linear) + ": " + why);
      throw Abort{};
    }
  }
  AsyncCopy c;
  c.dst = static_cast<unsigned char*>(dst);
  c.size = cp_size;
  c.group = t.copy_groups;
  if (src_size) std::memcpy(c.bytes, src, src_size);
  if (options().poison) std::memset(dst, 0xff, cp_size);  // in flight: undefined until the wait
  t.copies.push_back(c);
}

template <class T>
uint64_t to_bits(T v) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "warp shuffles move up to 8 bytes");
  uint64_t u = 0;
  std::memcpy(&u, &v, sizeof(T));
  return u;
}
template <class T>
T from_bits(uint64_t u) {
  T v;
  std::memcpy(&v, &u, sizeof(T));
  return v;
}

}  // namespace detail

// The __syncthreads ("file.cu:line") reached since the last clear, in order of first arrival.
inline const std::vector<std::string>& barrier_sites() { return detail::barrier_site_list(); }
inline void clear_barrier_sites() { detail::barrier_site_list().clear(); }

// ---- Warp-level matrix instructions and cp.async (what ../mma.cuh calls in the emulator) ---------
enum class MmaKind { m16n8k16_bf16, m16n8k16_f16, m16n8k8_tf32 };

// d = a·b + c for the calling lane's registers (see detail::mma_complete). d may alias c.
inline void mma_sync(MmaKind kind, float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]) {
  detail::MmaOperands in;
  std::memcpy(in.a, a, sizeof in.a);
  std::memcpy(in.b, b, sizeof in.b);
  std::memcpy(in.c, c, sizeof in.c);
  float out[4];
  const detail::WarpOp op = kind == MmaKind::m16n8k16_bf16  ? detail::WarpOp::mma_m16n8k16_bf16
                            : kind == MmaKind::m16n8k16_f16 ? detail::WarpOp::mma_m16n8k16_f16
                                                            : detail::WarpOp::mma_m16n8k8_tf32;
  detail::matrix_warp_op(op, 0, 0, &in, out);
  std::memcpy(d, out, sizeof out);
}

// ldmatrix .m8n8 .x`num` (1, 2 or 4) {.trans} .b16: r[0..num) for the calling lane; `row` is the row
// address this lane provides (see detail::ldmatrix_complete).
inline void ldmatrix_sync(int num, bool trans, const void* row, uint32_t* r) {
  uint32_t out[4];
  detail::matrix_warp_op(detail::WarpOp::ldmatrix, num | (trans ? 16 : 0), detail::to_bits(row), nullptr, out);
  std::memcpy(r, out, sizeof(uint32_t) * size_t(num));
}

// cp.async.{ca,cg}.shared.global [dst], [src], cp_size, src_size: deferred until the group's wait.
inline void cp_async(void* dst, const void* src, unsigned cp_size, unsigned src_size, bool cg) {
  detail::cp_async(dst, src, cp_size, src_size, cg);
}
// cp.async.commit_group: the cp.async issued since the last commit form a group.
inline void cp_async_commit_group() { ++detail::tls_thread->copy_groups; }
// cp.async.wait_group n: every committed group but the n most recent has landed.
inline void cp_async_wait_group(unsigned n) { detail::land_async_copies(*detail::tls_thread, n); }

namespace detail {
// Stream capture (defined in emulator/capture.h): whether `stream` is capturing; how many streams
// are; recording `node` into the stream's graph; and failing an operation no capture can hold
// (cudaErrorStreamCaptureUnsupported, the capture of `stream`, or of every stream, invalidated).
inline bool capturing(cudaStream_t stream) { return stream && stream->capture; }
inline int active_captures();
inline cudaError_t record(cudaStream_t stream, std::function<cudaError_t()> node);
inline cudaError_t unsupported_in_capture(cudaStream_t stream);
}  // namespace detail

// Kernel grids run so far (launches and replayed kernel nodes; read it between launches).
inline int64_t grids_run() {
  std::lock_guard<std::mutex> lock(detail::launch_mutex());
  return detail::grids_run_ref();
}

// Runs kernel(args...) over the grid; returns what cudaGetLastError would after a real launch. On a
// capturing stream the launch is recorded instead, its arguments copied by value (as a GPU bakes
// them into the graph's kernel node) and its configuration checked now.
template <class... P, class... A>
cudaError_t launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, A&&... args) {
  if (detail::capturing(stream)) {
    if (const cudaError_t e = detail::check_config(grid, block, smem); e != cudaSuccess) return e;
    auto params = std::make_shared<std::tuple<std::decay_t<P>...>>(std::forward<A>(args)...);
    return detail::record(stream, [kernel, grid, block, smem, params] {
      const std::function<void()> body = [&] { std::apply(kernel, *params); };
      return detail::run_grid(grid, block, smem, body);
    });
  }
  std::tuple<std::decay_t<P>...> params(std::forward<A>(args)...);
  const std::function<void()> body = [&] { std::apply(kernel, params); };
  return detail::run_grid(grid, block, smem, body);
}

}  // namespace nf::emu

// ---------------------------------------------------------------------------------------------
// Built-in variables and shared memory
// ---------------------------------------------------------------------------------------------
#define threadIdx (static_cast<const uint3&>(::nf::emu::detail::tls_thread->idx))
#define blockIdx (static_cast<const uint3&>(::nf::emu::detail::launch_state().block_idx))
#define blockDim (static_cast<const dim3&>(::nf::emu::detail::launch_state().block_dim))
#define gridDim (static_cast<const dim3&>(::nf::emu::detail::launch_state().grid_dim))
constexpr int warpSize = 32;

namespace nf::emu {
template <class T>
using shared_t = T;
}
// Static shared storage: NF_SHARED(float[16][65], tile) declares `tile` as float[16][65].
#define NF_SHARED(T, name)                                                               \
  static char nf_shared_key_##name;                                                       \
  ::nf::emu::shared_t<T>& name = *static_cast<::nf::emu::shared_t<T>*>(                   \
      ::nf::emu::detail::static_shared(&nf_shared_key_##name, sizeof(::nf::emu::shared_t<T>), \
                                       alignof(::nf::emu::shared_t<T>)))
// The launch's dynamic shared memory as T* (16-byte aligned).
#define NF_DYNAMIC_SHARED(T, name) T* name = static_cast<T*>(::nf::emu::detail::dynamic_shared())

// ---------------------------------------------------------------------------------------------
// Synchronisation, warp operations, atomics
// ---------------------------------------------------------------------------------------------
#define NF_EMU_STRINGIFY2(x) #x
#define NF_EMU_STRINGIFY(x) NF_EMU_STRINGIFY2(x)
#define __syncthreads() ::nf::emu::detail::barrier(__FILE__ ":" NF_EMU_STRINGIFY(__LINE__))
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  ::nf::emu::detail::warp_op(::nf::emu::detail::WarpOp::sync, mask, 0, 0, 32);
}

template <class T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = 32) {
  using namespace ::nf::emu::detail;
  return from_bits<T>(warp_op(WarpOp::shfl_idx, mask, to_bits(var), src_lane, width));
}
template <class T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32) {
  using namespace ::nf::emu::detail;
  return from_bits<T>(warp_op(WarpOp::shfl_up, mask, to_bits(var), int(delta), width));
}
template <class T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32) {
  using namespace ::nf::emu::detail;
  return from_bits<T>(warp_op(WarpOp::shfl_down, mask, to_bits(var), int(delta), width));
}
template <class T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = 32) {
  using namespace ::nf::emu::detail;
  return from_bits<T>(warp_op(WarpOp::shfl_xor, mask, to_bits(var), lane_mask, width));
}
inline unsigned __ballot_sync(unsigned mask, int pred) {
  using namespace ::nf::emu::detail;
  return unsigned(warp_op(WarpOp::ballot, mask, pred != 0, 0, 32));
}
inline int __any_sync(unsigned mask, int pred) {
  using namespace ::nf::emu::detail;
  return int(warp_op(WarpOp::any, mask, pred != 0, 0, 32));
}
inline int __all_sync(unsigned mask, int pred) {
  using namespace ::nf::emu::detail;
  return int(warp_op(WarpOp::all, mask, pred != 0, 0, 32));
}

#ifdef __SANITIZE_THREAD__  // TSan models no fences; the emulator's atomics are sequentially consistent anyway
inline void __threadfence() {}
#else
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
#endif
inline void __threadfence_block() { __threadfence(); }

// Integer atomics map to the compiler's; float atomics are compare-and-swap loops.
#define NF_EMU_INT_ATOMICS(T)                                                                  \
  inline T atomicAdd(T* a, T v) { return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST); }         \
  inline T atomicSub(T* a, T v) { return __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST); }         \
  inline T atomicAnd(T* a, T v) { return __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST); }         \
  inline T atomicOr(T* a, T v) { return __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST); }           \
  inline T atomicXor(T* a, T v) { return __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST); }         \
  inline T atomicExch(T* a, T v) { return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST); }       \
  inline T atomicCAS(T* a, T expected, T desired) {                                            \
    __atomic_compare_exchange_n(a, &expected, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); \
    return expected;                                                                           \
  }                                                                                            \
  inline T atomicMax(T* a, T v) {                                                              \
    T old = __atomic_load_n(a, __ATOMIC_SEQ_CST);                                              \
    while (old < v && !__atomic_compare_exchange_n(a, &old, v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) { \
    }                                                                                          \
    return old;                                                                                \
  }                                                                                            \
  inline T atomicMin(T* a, T v) {                                                              \
    T old = __atomic_load_n(a, __ATOMIC_SEQ_CST);                                              \
    while (old > v && !__atomic_compare_exchange_n(a, &old, v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) { \
    }                                                                                          \
    return old;                                                                                \
  }
NF_EMU_INT_ATOMICS(int)
NF_EMU_INT_ATOMICS(unsigned)
NF_EMU_INT_ATOMICS(unsigned long long)
#undef NF_EMU_INT_ATOMICS

namespace nf::emu::detail {
template <class F, class U>
F atomic_float_update(F* a, F v, F (*op)(F, F)) {
  static_assert(sizeof(F) == sizeof(U), "bit pattern type");
  U* bits = reinterpret_cast<U*>(a);
  U old = __atomic_load_n(bits, __ATOMIC_SEQ_CST);
  for (;;) {
    const U next = to_bits(op(from_bits<F>(old), v));
    if (__atomic_compare_exchange_n(bits, &old, next, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
      return from_bits<F>(old);
  }
}
}  // namespace nf::emu::detail
inline float atomicAdd(float* a, float v) {
  return ::nf::emu::detail::atomic_float_update<float, uint32_t>(a, v, [](float x, float y) { return x + y; });
}
inline double atomicAdd(double* a, double v) {
  return ::nf::emu::detail::atomic_float_update<double, uint64_t>(a, v, [](double x, double y) { return x + y; });
}
inline float atomicExch(float* a, float v) {
  return ::nf::emu::detail::atomic_float_update<float, uint32_t>(a, v, [](float, float y) { return y; });
}

// ---------------------------------------------------------------------------------------------
// Intrinsics (the fast-math ones computed exactly: the emulator checks logic, not ulps)
// ---------------------------------------------------------------------------------------------
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
// sin(πx), cos(πx) of a double: x reduced exactly (mod 2), then the product in long double.
inline double sinpi(double x) { return double(sinl(3.14159265358979323846264338327950288L * std::fmod(x, 2.0))); }
inline double cospi(double x) { return double(cosl(3.14159265358979323846264338327950288L * std::fmod(x, 2.0))); }
inline int __float_as_int(float x) { return ::nf::emu::detail::from_bits<int>(::nf::emu::detail::to_bits(x)); }
inline unsigned __float_as_uint(float x) { return ::nf::emu::detail::from_bits<unsigned>(::nf::emu::detail::to_bits(x)); }
inline float __int_as_float(int x) { return ::nf::emu::detail::from_bits<float>(::nf::emu::detail::to_bits(x)); }
inline float __uint_as_float(unsigned x) { return ::nf::emu::detail::from_bits<float>(::nf::emu::detail::to_bits(x)); }
inline unsigned __umulhi(unsigned a, unsigned b) { return unsigned((uint64_t(a) * b) >> 32); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(unsigned(x)); }
template <class T>
T __ldg(const T* p) {
  return *p;
}

// ---------------------------------------------------------------------------------------------
// Runtime API over host memory
// ---------------------------------------------------------------------------------------------
namespace nf::emu::detail {
inline std::map<const void*, size_t>& allocations() {
  static std::map<const void*, size_t> a;
  return a;
}
inline std::mutex& allocation_mutex() {
  static std::mutex m;
  return m;
}
// The host's physical memory (what a single allocation of an unlimited device may not exceed).
inline size_t host_memory_bytes() {
  static const size_t bytes = [] {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page > 0 ? size_t(pages) * size_t(page) : SIZE_MAX;
  }();
  return bytes;
}
// The bytes of the live allocations (what options().device_bytes caps). Under allocation_mutex.
inline size_t& allocated_bytes() {
  static size_t n = 0;
  return n;
}
}  // namespace nf::emu::detail

inline const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDeviceFunction: return "cudaErrorInvalidDeviceFunction";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorIllegalState: return "cudaErrorIllegalState";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
  }
  return "cudaErrorUnknown";
}
// Launch errors carry the emulator's explanation.
inline const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration:
    case cudaErrorLaunchFailure: return ::nf::emu::detail::last_launch_error().c_str();
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorIllegalState: return "the resource is not in a valid state for the operation";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    default: return "unknown error";
  }
}
inline cudaError_t cudaGetLastError() {
  cudaError_t e = ::nf::emu::detail::tls_last_error;
  ::nf::emu::detail::tls_last_error = cudaSuccess;
  return e;
}
inline cudaError_t cudaPeekAtLastError() { return ::nf::emu::detail::tls_last_error; }

// Past the capacity (options().device_bytes; unlimited, a single request larger than the host's
// physical memory), or when the host has no memory to give, *p is null and the error is
// cudaErrorMemoryAllocation (not sticky: the next call succeeds once memory was freed).
inline cudaError_t cudaMalloc(void** p, size_t bytes) {
  using namespace ::nf::emu::detail;
  if (!p) return set_error(cudaErrorInvalidValue);
  *p = nullptr;
  if (!bytes) return cudaSuccess;
  if (bytes > host_memory_bytes()) return set_error(cudaErrorMemoryAllocation);  // never fits
  {
    std::lock_guard<std::mutex> lock(allocation_mutex());
    const size_t cap = ::nf::emu::options().device_bytes;
    if (cap && (bytes > cap || allocated_bytes() > cap - bytes)) return set_error(cudaErrorMemoryAllocation);
    allocated_bytes() += bytes;  // reserved before the host allocation, so concurrent calls respect the cap
  }
  *p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (*p) std::memset(*p, 0xff, bytes);  // device memory starts as garbage: make it NaN
  std::lock_guard<std::mutex> lock(allocation_mutex());
  if (!*p) {
    allocated_bytes() -= bytes;
    return set_error(cudaErrorMemoryAllocation);
  }
  allocations()[*p] = bytes;
  return cudaSuccess;
}
template <class T>
cudaError_t cudaMalloc(T** p, size_t bytes) {
  return cudaMalloc(reinterpret_cast<void**>(p), bytes);
}
// cudaFree waits for the device: while a stream captures it fails and invalidates the capture.
inline cudaError_t cudaFree(void* p) {
  using namespace ::nf::emu::detail;
  if (!p) return cudaSuccess;
  if (active_captures()) return unsupported_in_capture(nullptr);
  {
    std::lock_guard<std::mutex> lock(allocation_mutex());
    auto it = allocations().find(p);
    if (it == allocations().end()) return set_error(cudaErrorInvalidValue);
    allocated_bytes() -= it->second;
    allocations().erase(it);
  }
  std::free(p);
  return cudaSuccess;
}
// Free and total device memory: the capacity (options().device_bytes, or the host's physical
// memory when unlimited) and what the live allocations leave of it.
inline cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  using namespace ::nf::emu::detail;
  if (!free_bytes || !total_bytes) return set_error(cudaErrorInvalidValue);
  const size_t total = ::nf::emu::options().device_bytes ? ::nf::emu::options().device_bytes : host_memory_bytes();
  std::lock_guard<std::mutex> lock(allocation_mutex());
  *total_bytes = total;
  *free_bytes = allocated_bytes() < total ? total - allocated_bytes() : 0;
  return cudaSuccess;
}
// (Synchronous: while a stream captures, it fails and invalidates the capture.)
inline cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind) {
  if (bytes && (!dst || !src)) return ::nf::emu::detail::set_error(cudaErrorInvalidValue);
  if (::nf::emu::detail::active_captures()) return ::nf::emu::detail::unsupported_in_capture(nullptr);
  if (bytes) std::memmove(dst, src, bytes);
  return cudaSuccess;
}
// On a capturing stream a device-to-device copy is recorded; a copy from or to host memory (pageable,
// as the emulator's always is) cannot be and invalidates the capture (emulator/capture.h).
inline cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                                   cudaStream_t stream = nullptr) {
  if (::nf::emu::detail::capturing(stream)) {
    if (kind != cudaMemcpyDeviceToDevice) return ::nf::emu::detail::unsupported_in_capture(stream);
    if (bytes && (!dst || !src)) return ::nf::emu::detail::set_error(cudaErrorInvalidValue);
    return ::nf::emu::detail::record(stream, [=] {
      if (bytes) std::memmove(dst, src, bytes);
      return cudaSuccess;
    });
  }
  return cudaMemcpy(dst, src, bytes, kind);
}
inline cudaError_t cudaMemset(void* dst, int value, size_t bytes) {
  if (bytes && !dst) return ::nf::emu::detail::set_error(cudaErrorInvalidValue);
  if (::nf::emu::detail::active_captures()) return ::nf::emu::detail::unsupported_in_capture(nullptr);
  if (bytes) std::memset(dst, value, bytes);
  return cudaSuccess;
}
inline cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream = nullptr) {
  if (::nf::emu::detail::capturing(stream)) {
    if (bytes && !dst) return ::nf::emu::detail::set_error(cudaErrorInvalidValue);
    return ::nf::emu::detail::record(stream, [=] {
      if (bytes) std::memset(dst, value, bytes);
      return cudaSuccess;
    });
  }
  return cudaMemset(dst, value, bytes);
}
inline cudaError_t cudaStreamCreate(cudaStream_t* s) {
  if (!s) return ::nf::emu::detail::set_error(cudaErrorInvalidValue);
  *s = new CUstream_st;
  return cudaSuccess;
}
inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) { return cudaStreamCreate(s); }
inline cudaError_t cudaStreamDestroy(cudaStream_t s) {
  delete s;
  return cudaSuccess;
}
// Waiting for a capturing stream (or, for the device, while any stream captures) is an error that
// invalidates the capture, as on a GPU.
inline cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  return ::nf::emu::detail::capturing(stream) ? ::nf::emu::detail::unsupported_in_capture(stream) : cudaSuccess;
}
inline cudaError_t cudaDeviceSynchronize() {
  return ::nf::emu::detail::active_captures() ? ::nf::emu::detail::unsupported_in_capture(nullptr) : cudaSuccess;
}
inline cudaError_t cudaEventCreate(cudaEvent_t* e) {
  if (!e) return ::nf::emu::detail::set_error(cudaErrorInvalidValue);
  *e = new CUevent_st;
  return cudaSuccess;
}
inline cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete e;
  return cudaSuccess;
}
inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t = nullptr) {
  if (!e) return ::nf::emu::detail::set_error(cudaErrorInvalidResourceHandle);
  e->time = std::chrono::steady_clock::now();
  e->recorded = true;
  return cudaSuccess;
}
inline cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  return e ? cudaSuccess : ::nf::emu::detail::set_error(cudaErrorInvalidResourceHandle);
}
inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (!ms || !start || !end || !start->recorded || !end->recorded)
    return ::nf::emu::detail::set_error(cudaErrorInvalidResourceHandle);
  *ms = std::chrono::duration<float, std::milli>(end->time - start->time).count();
  return cudaSuccess;
}
inline cudaError_t cudaGetDeviceCount(int* n) {
  if (!n) return ::nf::emu::detail::set_error(cudaErrorInvalidValue);
  *n = 1;
  return cudaSuccess;
}
inline cudaError_t cudaSetDevice(int d) {
  return d == 0 ? cudaSuccess : ::nf::emu::detail::set_error(cudaErrorInvalidDevice);
}
inline cudaError_t cudaGetDevice(int* d) {
  if (!d) return ::nf::emu::detail::set_error(cudaErrorInvalidValue);
  *d = 0;
  return cudaSuccess;
}
template <class F>
cudaError_t cudaFuncSetAttribute(F*, cudaFuncAttribute, int value) {
  return value >= 0 && size_t(value) <= ::nf::emu::kMaxShared ? cudaSuccess
                                                               : ::nf::emu::detail::set_error(cudaErrorInvalidValue);
}

#include "capture.h"
