// The communication thread: a FIFO of Jobs, run one at a time with MPI (see comm.h).
#include "comm.h"

#include <mpi.h>

#include <chrono>
#include <cstring>
#include <deque>
#include <thread>

namespace nf::dist {
namespace {

struct State {
  std::mutex mu;
  std::condition_variable cv;       // work queued
  std::condition_variable done_cv;  // a job finished
  std::deque<std::shared_ptr<Job>> queue;
  std::thread* thread = nullptr;    // never joined nor destroyed: a thread stuck in MPI must not block exit
  int rank = -1, size = -1, provided = -1;
  bool finalized = false;
  double busy = 0;
  std::vector<unsigned char> staging;
};

State& st() {
  static State* s = new State();  // leaked on purpose (see `thread`)
  return *s;
}

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::F32: return MPI_FLOAT;
    case DType::F64: return MPI_DOUBLE;
    case DType::I32: return MPI_INT;
    default: return MPI_UNSIGNED_CHAR;
  }
}
size_t elem_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F64: return 8;
    case DType::I32: return 4;
    default: return 1;
  }
}

std::string mpi_error(const char* call, int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) len = 0;
  return std::string(call) + " failed: " + std::string(text, len);
}

template <typename T>
void scale(void* p, size_t n, double f) {
  T* x = static_cast<T*>(p);
  for (size_t i = 0; i < n; i++) x[i] = static_cast<T>(x[i] * f);
}

// Runs one job with MPI; returns an empty string or the error.
std::string run(Job& j) {
  State& s = st();
  if (j.kind == Kind::Init) {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
      int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &s.provided);
      if (rc != MPI_SUCCESS) return "MPI_Init_thread failed";
      MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &s.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &s.size);
    return "";
  }
  if (s.rank < 0) return "MPI is not initialised";
  if (s.finalized) return "MPI has been finalised";
  int rc = MPI_SUCCESS;
  const MPI_Datatype type = mpi_type(j.dtype);
  switch (j.kind) {
    case Kind::Finalize:
      rc = MPI_Finalize();
      s.finalized = true;
      return rc == MPI_SUCCESS ? "" : mpi_error("MPI_Finalize", rc);
    case Kind::Barrier:
      rc = MPI_Barrier(MPI_COMM_WORLD);
      return rc == MPI_SUCCESS ? "" : mpi_error("MPI_Barrier", rc);
    case Kind::Broadcast:
      rc = MPI_Bcast(j.regions[0].data, static_cast<int>(j.regions[0].count), type, j.root, MPI_COMM_WORLD);
      return rc == MPI_SUCCESS ? "" : mpi_error("MPI_Bcast", rc);
    case Kind::AllGather:
      rc = MPI_Allgather(j.regions[0].data, static_cast<int>(j.regions[0].count), type, j.out,
                         static_cast<int>(j.regions[0].count), type, MPI_COMM_WORLD);
      return rc == MPI_SUCCESS ? "" : mpi_error("MPI_Allgather", rc);
    case Kind::AllReduce: {
      const size_t es = elem_size(j.dtype);
      size_t total = 0;
      for (auto& r : j.regions) total += r.count;
      if (total == 0) return "";
      // One region reduces in place; several are packed into one staging buffer (a bucket), so
      // the bucket costs one collective.
      void* buf = j.regions[0].data;
      if (j.regions.size() > 1) {
        if (s.staging.size() < total * es) s.staging.resize(total * es);
        size_t off = 0;
        for (auto& r : j.regions) {
          std::memcpy(s.staging.data() + off, r.data, r.count * es);
          off += r.count * es;
        }
        buf = s.staging.data();
      }
      const MPI_Op op = j.op == ReduceOp::Max ? MPI_MAX : MPI_SUM;
      // Chunks below 2^31 elements (MPI counts are int).
      const size_t chunk = size_t(1) << 30;
      for (size_t off = 0; off < total && rc == MPI_SUCCESS; off += chunk) {
        const size_t n = std::min(chunk, total - off);
        rc = MPI_Allreduce(MPI_IN_PLACE, static_cast<unsigned char*>(buf) + off * es, static_cast<int>(n), type, op, MPI_COMM_WORLD);
      }
      if (rc != MPI_SUCCESS) return mpi_error("MPI_Allreduce", rc);
      if (j.op == ReduceOp::Mean && s.size > 1) {
        const double f = 1.0 / s.size;
        if (j.dtype == DType::F32) scale<float>(buf, total, f);
        else if (j.dtype == DType::F64) scale<double>(buf, total, f);
      }
      if (j.regions.size() > 1) {
        size_t off = 0;
        for (auto& r : j.regions) {
          std::memcpy(r.data, s.staging.data() + off, r.count * es);
          off += r.count * es;
        }
      }
      return "";
    }
    default:
      return "unknown job";
  }
}

void loop() {
  State& s = st();
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lock(s.mu);
      s.cv.wait(lock, [&] { return !s.queue.empty(); });
      job = s.queue.front();
    }
    const auto t0 = std::chrono::steady_clock::now();
    std::string err;
    try {
      err = run(*job);
    } catch (const std::exception& e) {
      err = e.what();
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    {
      std::lock_guard<std::mutex> lock(s.mu);
      s.queue.pop_front();
      job->ok = err.empty();
      job->error = err;
      job->seconds = secs;
      if (job->kind != Kind::Init && job->kind != Kind::Finalize) s.busy += secs;
      job->done = true;
    }
    s.done_cv.notify_all();
    if (job->on_done) job->on_done(job.get());
  }
}

}  // namespace

void submit(const std::shared_ptr<Job>& job) {
  State& s = st();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (!s.thread) s.thread = new std::thread(loop);
    s.queue.push_back(job);
  }
  s.cv.notify_one();
}

bool wait(const std::shared_ptr<Job>& job, double timeout_ms) {
  State& s = st();
  std::unique_lock<std::mutex> lock(s.mu);
  return s.done_cv.wait_for(lock, std::chrono::duration<double, std::milli>(timeout_ms), [&] { return job->done; });
}

int rank() { return st().rank; }
int size() { return st().size; }
double busy_seconds() {
  std::lock_guard<std::mutex> lock(st().mu);
  return st().busy;
}
const char* thread_level_name() {
  switch (st().provided) {
    case MPI_THREAD_SINGLE: return "single";
    case MPI_THREAD_FUNNELED: return "funneled";
    case MPI_THREAD_SERIALIZED: return "serialized";
    case MPI_THREAD_MULTIPLE: return "multiple";
    default: return "none";
  }
}

}  // namespace nf::dist
