// Stream capture and CUDA graphs in the SIMT emulator (included at the end of simt.h).
//
// cudaStreamBeginCapture puts a stream in capture mode: from then on the work queued on it is
// recorded, not run, until cudaStreamEndCapture hands back the graph (cudaGraph_t) of everything
// recorded, in order. What is recorded: kernel launches (nf::emu::launch, their arguments copied by
// value as a GPU bakes them into kernel nodes, the configuration checked at capture),
// device-to-device cudaMemcpyAsync, cudaMemsetAsync, and host work queued with record_or_run (the
// cuBLASLt stand-in's products). cudaGraphInstantiate makes an executable graph (cudaGraphExec_t);
// cudaGraphLaunch runs its nodes in order on the calling thread (the emulator's streams are
// synchronous) and returns the first node's error; cudaGraphExecDestroy / cudaGraphDestroy free them.
//
// What a capture cannot hold fails as on a GPU (cudaErrorStreamCaptureUnsupported) and invalidates
// the capture, so cudaStreamEndCapture then returns cudaErrorStreamCaptureInvalidated and no graph:
// waiting for the capturing stream (cudaStreamSynchronize) or the device, copies from or to host
// memory (the emulator's host memory is pageable; a GPU records no pageable copy), synchronous
// cudaMemcpy / cudaMemset, and cudaFree (which waits for the device) while any stream captures.
// cudaMalloc is allowed (cudaStreamCaptureModeRelaxed, the mode the backend captures in).
// Counters (graph_stats) say how many graphs were captured and launched, and how many nodes of each
// kind the launches ran, so tests can check that a replay ran the recorded work.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <vector>

enum cudaStreamCaptureStatus {
  cudaStreamCaptureStatusNone = 0,
  cudaStreamCaptureStatusActive = 1,
  cudaStreamCaptureStatusInvalidated = 2,
};
enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2,
};

struct CUgraph_st {
  std::vector<std::function<cudaError_t()>> nodes;
};
struct CUgraphExec_st {
  std::vector<std::function<cudaError_t()>> nodes;
};
typedef struct CUgraph_st* cudaGraph_t;
typedef struct CUgraphExec_st* cudaGraphExec_t;

namespace nf::emu {

// Captures begun and graphs launched since the process started, and the nodes those launches ran.
struct GraphStats {
  int64_t captures = 0, launches = 0, nodes_run = 0;
};

namespace detail {

inline std::mutex& capture_mutex() {
  static std::mutex m;
  return m;
}
// The streams capturing now (under capture_mutex).
inline std::vector<cudaStream_t>& capturing_streams() {
  static std::vector<cudaStream_t> v;
  return v;
}
inline GraphStats& graph_stats_ref() {
  static GraphStats s;
  return s;
}

inline int active_captures() {
  std::lock_guard<std::mutex> lock(capture_mutex());
  return int(capturing_streams().size());
}

inline cudaError_t record(cudaStream_t stream, std::function<cudaError_t()> node) {
  if (stream->invalidated) return set_error(cudaErrorStreamCaptureInvalidated);
  stream->capture->nodes.push_back(std::move(node));
  return cudaSuccess;
}

inline cudaError_t unsupported_in_capture(cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(capture_mutex());
  for (cudaStream_t s : capturing_streams())
    if (!stream || s == stream) s->invalidated = true;
  return set_error(cudaErrorStreamCaptureUnsupported);
}

}  // namespace detail

// Runs `work` now, or records it into the capture of `stream` (host work standing in for device
// work, e.g. the cuBLASLt stand-in's products): what it returns is the node's error at launch.
inline cudaError_t record_or_run(cudaStream_t stream, std::function<cudaError_t()> work) {
  return detail::capturing(stream) ? detail::record(stream, std::move(work)) : work();
}

inline GraphStats graph_stats() {
  std::lock_guard<std::mutex> lock(detail::capture_mutex());
  return detail::graph_stats_ref();
}

}  // namespace nf::emu

inline cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode) {
  using namespace ::nf::emu::detail;
  if (!stream) return set_error(cudaErrorStreamCaptureUnsupported);  // (the legacy stream cannot capture)
  if (stream->capture) return set_error(cudaErrorIllegalState);
  std::lock_guard<std::mutex> lock(capture_mutex());
  stream->capture = new CUgraph_st;
  stream->invalidated = false;
  capturing_streams().push_back(stream);
  ++graph_stats_ref().captures;
  return cudaSuccess;
}

inline cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  using namespace ::nf::emu::detail;
  if (!stream || !graph) return set_error(cudaErrorInvalidValue);
  if (!stream->capture) return set_error(cudaErrorIllegalState);
  std::lock_guard<std::mutex> lock(capture_mutex());
  auto& v = capturing_streams();
  v.erase(std::remove(v.begin(), v.end(), stream), v.end());
  *graph = stream->capture;
  stream->capture = nullptr;
  if (stream->invalidated) {
    delete *graph;
    *graph = nullptr;
    stream->invalidated = false;
    return set_error(cudaErrorStreamCaptureInvalidated);
  }
  return cudaSuccess;
}

inline cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  if (!status) return ::nf::emu::detail::set_error(cudaErrorInvalidValue);
  *status = !stream || !stream->capture ? cudaStreamCaptureStatusNone
            : stream->invalidated       ? cudaStreamCaptureStatusInvalidated
                                        : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}

inline cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long = 0) {
  if (!exec || !graph) return ::nf::emu::detail::set_error(cudaErrorInvalidValue);
  *exec = new CUgraphExec_st{graph->nodes};
  return cudaSuccess;
}

// Runs the graph's nodes in order (a launch on a capturing stream would be a child graph: refused).
inline cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  using namespace ::nf::emu::detail;
  if (!exec) return set_error(cudaErrorInvalidResourceHandle);
  if (capturing(stream)) return unsupported_in_capture(stream);
  {
    std::lock_guard<std::mutex> lock(capture_mutex());
    ++graph_stats_ref().launches;
    graph_stats_ref().nodes_run += int64_t(exec->nodes.size());
  }
  for (auto& node : exec->nodes)
    if (const cudaError_t e = node(); e != cudaSuccess) return set_error(e);
  return cudaSuccess;
}

inline cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}
inline cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}
