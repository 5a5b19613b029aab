#include "threadpool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace nf {
namespace {

thread_local bool tls_in_parallel = false;
thread_local bool tls_serial = false;  // inside a SerialScope

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
    // A new worker has seen every job posted so far: were it to start from generation 0, it would
    // take the next job for a second one and decrement active_ twice, and run() would wait forever.
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
      active_ = static_cast<int>(workers_.size());
      ++generation_;
    }
    wake_.notify_all();
    work_on_job();
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return active_ == 0; });
  }

 private:
  struct Job {
    RangeFn fn = nullptr;
    void* ctx = nullptr;
    int64_t n = 0, chunk = 1;
  };

  void work_on_job() {
    tls_in_parallel = true;
    for (;;) {
      int64_t b = next_.fetch_add(job_.chunk, std::memory_order_relaxed);
      if (b >= job_.n) break;
      job_.fn(job_.ctx, b, std::min(job_.n, b + job_.chunk));
    }
    tls_in_parallel = false;
  }

  void worker_loop(uint64_t seen) {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
        if (stopping_) return;
        seen = generation_;
      }
      work_on_job();
      std::lock_guard<std::mutex> lock(mutex_);
      if (--active_ == 0) done_.notify_one();
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
  int active_ = 0;
  uint64_t generation_ = 0;
  bool stopping_ = false;
};

Pool& pool() {
  static Pool* p = new Pool(env_threads());  // never destroyed: workers may outlive static teardown
  return *p;
}

}  // namespace

int num_threads() { return tls_serial ? 1 : pool().size(); }

void set_num_threads(int n) { pool().resize(n >= 1 ? std::min(n, 256) : machine_threads()); }

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
