// Collectives over MPI, run by one communication thread. Nothing here knows N-API or JS: callers
// (binding.cpp) submit Jobs of plain pointers and counts; the thread runs them in submission
// order (so every rank issues the same collectives in the same order) and marks each done with a
// status; a completion callback, supplied by the caller, runs on the communication thread.
//
// MPI is initialised, called and finalised on this thread only (MPI_THREAD_FUNNELED suffices;
// the thread that calls MPI_Init_thread is MPI's "main" thread). Errors return (MPI_ERRORS_RETURN
// on MPI_COMM_WORLD) and become the job's error text instead of aborting the process.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace nf::dist {

enum class Kind { Init, Finalize, AllReduce, Broadcast, AllGather, Barrier };
enum class DType { F32, F64, I32, U8 };
enum class ReduceOp { Sum, Mean, Max };

struct Region {
  void* data;
  size_t count;  // elements
};

struct Job {
  Kind kind;
  DType dtype = DType::F32;
  ReduceOp op = ReduceOp::Sum;
  int root = 0;
  std::vector<Region> regions;  // AllReduce: the buffers reduced as one (packed); others: regions[0]
  void* out = nullptr;          // AllGather: world_size × regions[0].count elements
  // Filled by the communication thread.
  bool done = false;
  bool ok = true;
  std::string error;
  double seconds = 0;  // time inside MPI
  std::function<void(Job*)> on_done;  // runs on the communication thread after `done` is set
};

// Starts the thread (first call) and queues `job`.
void submit(const std::shared_ptr<Job>& job);
// Blocks the caller until `job` is done or `timeout_ms` passes; returns whether it is done.
bool wait(const std::shared_ptr<Job>& job, double timeout_ms);
// Rank and size after a successful Init job (-1 before).
int rank();
int size();
const char* thread_level_name();
// Seconds spent inside MPI collectives so far, and how many jobs are queued or running.
double busy_seconds();

}  // namespace nf::dist
