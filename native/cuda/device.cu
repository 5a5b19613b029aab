// The device layer (device.h) and the backend's stream and scratch buffers (common.cuh).
// One stream per device, created non-blocking on first use; scratch slots are per device too and
// grow on demand (cudaFree waits for the device, so a buffer is never freed under a running kernel).
#include "device.h"

#include <mutex>

#include "common.cuh"

namespace nf::cuda {

namespace {

constexpr int kMaxDevices = 16;

struct DeviceState {
  cudaStream_t stream = nullptr;
  bool has_stream = false;
  void* scratch[kWorkspaceSlots] = {};
  size_t scratch_bytes[kWorkspaceSlots] = {};
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

Status workspace(int slot, size_t bytes, void** ptr) {
  NF_CHECK(slot >= 0 && slot < kWorkspaceSlots, "workspace", "slot out of range");
  std::lock_guard<std::mutex> lock(state_mutex());
  DeviceState* s = nullptr;
  NF_TRY(current_state("workspace", &s));
  if (s->scratch_bytes[slot] < bytes) {
    NF_CUDA_TRY("workspace", cudaFree(s->scratch[slot]));
    s->scratch[slot] = nullptr;
    s->scratch_bytes[slot] = 0;
    NF_CUDA_TRY("workspace", cudaMalloc(&s->scratch[slot], bytes));
    s->scratch_bytes[slot] = bytes;
  }
  *ptr = s->scratch[slot];
  return Status::Ok();
}

Status release_workspace() {
  std::lock_guard<std::mutex> lock(state_mutex());
  DeviceState* s = nullptr;
  NF_TRY(current_state("release_workspace", &s));
  for (int i = 0; i < kWorkspaceSlots; ++i) {
    NF_CUDA_TRY("release_workspace", cudaFree(s->scratch[i]));
    s->scratch[i] = nullptr;
    s->scratch_bytes[i] = 0;
  }
  return Status::Ok();
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
  NF_CUDA_TRY("device_free", cudaFree(ptr));
  return Status::Ok();
}

Status copy_to_device(void* dst, const void* src, size_t bytes) {
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  NF_CUDA_TRY("copy_to_device", cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s));
  return Status::Ok();
}

Status copy_to_host(void* dst, const void* src, size_t bytes) {
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  NF_CUDA_TRY("copy_to_host", cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s));
  NF_CUDA_TRY("copy_to_host", cudaStreamSynchronize(s));
  return Status::Ok();
}

Status copy_on_device(void* dst, const void* src, size_t bytes) {
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  NF_CUDA_TRY("copy_on_device", cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
  return Status::Ok();
}

Status fill_zero(void* dst, size_t bytes) {
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  NF_CUDA_TRY("fill_zero", cudaMemsetAsync(dst, 0, bytes, s));
  return Status::Ok();
}

Status synchronize() {
  cudaStream_t s;
  NF_TRY(backend_stream(&s));
  NF_CUDA_TRY("synchronize", cudaStreamSynchronize(s));
  return Status::Ok();
}

}  // namespace nf::cuda
