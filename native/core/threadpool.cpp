#include "threadpool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace nf {
namespace {

thread_local bool tls_in_parallel = false;
thread_local bool tls_serial = false;  // inside a SerialScope
// report_failure's flags: the running region's (on the threads working on it), else this thread's.
thread_local std::atomic<bool>* tls_region_failed = nullptr;
thread_local bool tls_failed = false;

// How long (microseconds) a worker spins for the next job, and the caller for the workers to
// finish, before they sleep: 0 (the default, NF_THREAD_SPIN_US unset) never spins. A spin of about
// 100 us bridges the gaps between the parallel regions of a step (the next region of an op, the JS
// between two ops) and saves their wake-ups on an idle machine, as OpenMP's and onnxruntime's
// threads do; with another process on a core it costs, since a spinning thread keeps the core the
// thread it waits for needs.
int env_spin_us() {
  const char* s = std::getenv("NF_THREAD_SPIN_US");
  return s && *s ? std::clamp(std::atoi(s), 0, kMaxSpinUs) : 0;
}
std::atomic<int> g_spin_us{env_spin_us()};

// How long the caller spins, whatever NF_THREAD_SPIN_US says, for the workers that joined its job
// to finish their last chunks: they are running, so the wait is usually a few microseconds, less
// than sleeping and being woken would take.
constexpr int kJoinedSpinUs = 50;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

int machine_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

int env_threads() {
  const char* s = std::getenv("NF_NUM_THREADS");
  if (!s || !*s) return machine_threads();
  int n = std::atoi(s);
  return n >= 1 ? std::min(n, 256) : machine_threads();
}

class Pool {
 public:
  explicit Pool(int n) { resize(n); }
  ~Pool() { stop_workers(); }

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  void resize(int n) {
    std::lock_guard<std::mutex> run_lock(run_mutex_);
    stop_workers();
    stopping_ = false;
    // A new worker has seen every job posted so far (were it to start from generation 0, it would
    // wake at once for a job that has ended).
    const uint64_t seen = generation_;
    for (int i = 1; i < n; ++i) workers_.emplace_back([this, seen] { worker_loop(seen); });
  }

  void run(int64_t n, int64_t grain, RangeFn fn, void* ctx) {
    if (n <= 0) return;
    grain = std::max<int64_t>(grain, 1);
    std::unique_lock<std::mutex> run_lock(run_mutex_, std::try_to_lock);
    if (tls_in_parallel || !run_lock.owns_lock() || workers_.empty() || n <= grain) {
      fn(ctx, 0, n);  // nested, contended or tiny: run inline
      return;
    }
    // About four chunks per thread balances uneven work without much claiming overhead.
    int64_t chunk = std::max<int64_t>(grain, (n + 4 * size() - 1) / (4 * size()));
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = Job{fn, ctx, n, chunk};
      next_.store(0, std::memory_order_relaxed);
      failed_.store(false, std::memory_order_relaxed);
      open_ = true;
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    work_on_job();
    wait_for_joined();
    if (failed_.load(std::memory_order_relaxed)) report_failure();  // (ordered by active_'s release)
  }

 private:
  struct Job {
    RangeFn fn = nullptr;
    void* ctx = nullptr;
    int64_t n = 0, chunk = 1;
  };

  // Every chunk is claimed: close the job, so that a worker still waking up (tens of microseconds
  // on a virtual machine, longer than a small op's whole region) stays out of it, and wait only
  // for the workers that joined, which are running their last chunk.
  void wait_for_joined() {
    std::unique_lock<std::mutex> lock(mutex_);
    open_ = false;
    if (active_.load(std::memory_order_acquire) == 0) return;
    lock.unlock();
    const int spin = std::max(g_spin_us.load(std::memory_order_relaxed), kJoinedSpinUs);
    if (spin_until(spin, [this] { return active_.load(std::memory_order_acquire) == 0; })) return;
    lock.lock();
    done_.wait(lock, [this] { return active_.load(std::memory_order_acquire) == 0; });
  }

  void work_on_job() {
    tls_in_parallel = true;
    tls_region_failed = &failed_;
    for (;;) {
      int64_t b = next_.fetch_add(job_.chunk, std::memory_order_relaxed);
      if (b >= job_.n) break;
      job_.fn(job_.ctx, b, std::min(job_.n, b + job_.chunk));
    }
    tls_region_failed = nullptr;
    tls_in_parallel = false;
  }

  void worker_loop(uint64_t seen) {
    for (;;) {
      // The next job usually follows within microseconds (the next region of the same op, or the
      // next op of a step): spin for it a moment before sleeping on the condition variable.
      spin_until(g_spin_us.load(std::memory_order_relaxed), [&] { return generation_.load(std::memory_order_acquire) != seen || stopping_.load(std::memory_order_relaxed); });
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || generation_.load(std::memory_order_relaxed) != seen; });
        if (stopping_) return;
        seen = generation_.load(std::memory_order_relaxed);
        if (!open_) continue;  // the caller finished this job without us
        active_.fetch_add(1, std::memory_order_relaxed);
      }
      work_on_job();
      if (active_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(mutex_);  // the caller checks active_ under it before it sleeps
        done_.notify_one();
      }
    }
  }

  // Spins (with the CPU's pause hint) until done() or `us` microseconds have passed; returns done().
  template <class Done>
  static bool spin_until(int us, Done done) {
    if (us == 0) return done();
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
    for (;;) {
      for (int i = 0; i < 64; ++i) {
        if (done()) return true;
        cpu_relax();
      }
      if (std::chrono::steady_clock::now() >= until) return done();
    }
  }

  void stop_workers() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
  }

  std::mutex run_mutex_;  // one job at a time
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> workers_;
  Job job_;
  std::atomic<int64_t> next_{0};
  bool open_ = false;                    // the current job still takes workers (under mutex_)
  std::atomic<int> active_{0};           // workers that joined the current job and are still on it
  std::atomic<bool> failed_{false};      // a chunk of the current job reported a failure
  std::atomic<uint64_t> generation_{0};  // jobs posted so far
  std::atomic<bool> stopping_{false};  // written under mutex_; read by spinning workers without it
};

Pool& pool() {
  static Pool* p = new Pool(env_threads());  // never destroyed: workers may outlive static teardown
  return *p;
}

}  // namespace

void report_failure() {
  if (tls_region_failed) tls_region_failed->store(true, std::memory_order_relaxed);
  else tls_failed = true;
}

bool take_failure() { return std::exchange(tls_failed, false); }

bool in_parallel_region() { return tls_in_parallel; }

int num_threads() { return tls_serial ? 1 : pool().size(); }

void set_num_threads(int n) { pool().resize(n >= 1 ? std::min(n, 256) : machine_threads()); }

int thread_spin_us() { return g_spin_us.load(std::memory_order_relaxed); }

void set_thread_spin_us(int us) { g_spin_us.store(std::clamp(us, 0, kMaxSpinUs), std::memory_order_relaxed); }

void parallel_for_raw(int64_t n, int64_t grain, RangeFn fn, void* ctx) {
  if (tls_serial) {
    if (n > 0) fn(ctx, 0, n);
    return;
  }
  pool().run(n, grain, fn, ctx);
}

SerialScope::SerialScope() : was_serial_(tls_serial) { tls_serial = true; }
SerialScope::~SerialScope() { tls_serial = was_serial_; }

}  // namespace nf
