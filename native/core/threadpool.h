// The one thread pool every CPU kernel uses. Sized to the machine (std::thread::hardware_concurrency)
// unless NF_NUM_THREADS says otherwise; set_num_threads changes it at run time.
//
// parallel_for(n, f) calls f(begin, end) over disjoint chunks covering [0, n), on the pool's
// workers and the calling thread, and returns when all chunks are done. Chunks are claimed
// dynamically, so uneven work balances. A parallel_for issued from inside a worker, or while
// another thread holds the pool, runs inline on the caller: nesting and concurrent callers are safe.
#pragma once
#include <cstdint>

namespace nf {

int num_threads();
void set_num_threads(int n);  // n < 1 means "the machine's core count"

// How long (microseconds) idle pool threads spin before they sleep (threadpool.cpp): 0, the
// default, unless NF_THREAD_SPIN_US says otherwise; at most kMaxSpinUs.
constexpr int kMaxSpinUs = 10000;
int thread_spin_us();
void set_thread_spin_us(int us);

// While one lives, parallel_for on this thread runs inline and num_threads() is 1 there, without
// starting the pool: for the load-time self-check (native/cpu/selfcheck.cpp), which runs before
// anything else and must leave the process as it found it.
class SerialScope {
 public:
  SerialScope();
  ~SerialScope();
  SerialScope(const SerialScope&) = delete;
  SerialScope& operator=(const SerialScope&) = delete;

 private:
  bool was_serial_;
};

// A kernel that cannot do its share of a parallel region (its thread's scratch buffer could not be
// allocated, allocator.h) calls report_failure() and skips the work. A failure on a pool thread
// reaches the thread that started the region once the region has ended, and take_failure() there
// says whether anything this thread ran or started reported one since the last take_failure(),
// and clears it: the op binding turns that into an error rather than return an incomplete result.
void report_failure();
bool take_failure();
// Whether this thread is running a chunk of a parallel region (a pool thread's, or the calling
// thread's share) rather than code of its own.
bool in_parallel_region();

using RangeFn = void (*)(void* ctx, int64_t begin, int64_t end);
void parallel_for_raw(int64_t n, int64_t grain, RangeFn fn, void* ctx);

// grain: the smallest chunk worth handing to a thread (1 for coarse items such as GEMM tiles).
template <class F>
void parallel_for(int64_t n, int64_t grain, F&& f) {
  parallel_for_raw(
      n, grain, [](void* ctx, int64_t b, int64_t e) { (*static_cast<F*>(ctx))(b, e); },
      const_cast<void*>(static_cast<const void*>(&f)));
}

template <class F>
void parallel_for(int64_t n, F&& f) {
  parallel_for(n, 1, static_cast<F&&>(f));
}

}  // namespace nf
