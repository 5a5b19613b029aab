#include "allocations.h"

#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace nf::napi {
namespace {

struct Pin {
  int count = 0;          // async ops in flight that use the buffer
  bool released = false;  // release() was called meanwhile: detach at the last unpin
};

// Pins by buffer data pointer. Worker threads never touch it (pin/unpin run on the JS thread),
// but several environments (worker_threads) share the addon, hence the mutex.
std::mutex pins_mutex;
std::unordered_map<void*, Pin> pins;

}  // namespace

void release_buffer(Napi::ArrayBuffer buffer) {
  if (buffer.IsDetached()) return;
  {
    std::lock_guard<std::mutex> lock(pins_mutex);
    auto it = pins.find(buffer.Data());
    if (it != pins.end()) {
      it->second.released = true;
      return;
    }
  }
  buffer.Detach();
}

std::vector<void*> pin(const std::vector<void*>& data) {
  std::lock_guard<std::mutex> lock(pins_mutex);
  for (void* d : data) ++pins[d].count;
  return data;
}

void unpin(std::vector<void*>& pinned, const std::vector<Napi::ArrayBuffer>& buffers) {
  std::vector<void*> detach;
  {
    std::lock_guard<std::mutex> lock(pins_mutex);
    for (void* d : pinned) {
      auto it = pins.find(d);
      if (it == pins.end() || --it->second.count > 0) continue;
      if (it->second.released) detach.push_back(d);
      pins.erase(it);
    }
  }
  pinned.clear();
  for (Napi::ArrayBuffer b : buffers)
    for (void* d : detach)
      if (!b.IsDetached() && b.Data() == d) b.Detach();
}

size_t aligned_offset(Napi::ArrayBuffer buffer) {
  return (64 - reinterpret_cast<uintptr_t>(buffer.Data()) % 64) % 64;
}

}  // namespace nf::napi
