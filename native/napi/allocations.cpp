#include "allocations.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include "../core/block_cache.h"
#include "args.h"

namespace nf::napi {

struct Allocation {
  void* data;
  size_t bytes;
  int pins = 0;            // async ops in flight that use the memory
  bool freed = false;      // the memory has been returned
  bool released = false;   // JS released it (release()) while pinned: free at the last unpin
  bool collected = false;  // the ArrayBuffer's finalizer ran while pinned: free and delete at the last unpin
};

namespace {

std::mutex registry_mutex;
std::unordered_map<void*, Allocation*> live;  // allocations JS has not released, by data pointer
int64_t live_bytes = 0;                        // bytes allocated and not yet freed (registry_mutex)

// Returns the memory (once); callers hold registry_mutex.
void free_memory(Napi::Env env, Allocation* a) {
  if (a->freed) return;
  Napi::MemoryManagement::AdjustExternalMemory(env, -static_cast<int64_t>(a->bytes));
  block_free(a->data, a->bytes);
  live_bytes -= static_cast<int64_t>(a->bytes);
  a->freed = true;
}

void finalize(Napi::Env env, void* data, Allocation* a) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  auto it = live.find(data);
  if (it != live.end() && it->second == a) live.erase(it);
  if (a->pins > 0) {
    a->collected = true;
    return;
  }
  free_memory(env, a);
  delete a;
}

}  // namespace

bool poison_uninitialized() {
  static const bool poison = [] {
    const char* v = std::getenv("NF_POISON_UNINITIALIZED");
    return v && *v && std::strcmp(v, "0") != 0;
  }();
  return poison;
}

Napi::ArrayBuffer allocate_buffer(Napi::Env env, size_t bytes, Fill fill) {
  void* p = block_alloc(bytes);
  if (!p) throw_error(env, "ERR_NF_OUT_OF_MEMORY", "allocate: out of memory for " + std::to_string(bytes) + " bytes");
  if (fill == Fill::zero)
    std::memset(p, 0, bytes);
  else if (poison_uninitialized())
    std::memset(p, 0xFF, bytes);  // all-ones: a NaN in every float32, -1 in every int32
  Napi::MemoryManagement::AdjustExternalMemory(env, static_cast<int64_t>(bytes));
  auto* a = new Allocation{p, bytes};
  {
    std::lock_guard<std::mutex> lock(registry_mutex);
    live[p] = a;
    live_bytes += static_cast<int64_t>(bytes);
  }
  return Napi::ArrayBuffer::New(env, p, bytes, finalize, a);
}

void release_buffer(Napi::Env env, Napi::ArrayBuffer buffer) {
  if (buffer.IsDetached()) return;
  void* data = buffer.Data();
  std::lock_guard<std::mutex> lock(registry_mutex);
  Allocation* a = nullptr;
  auto it = live.find(data);
  if (it != live.end()) {
    a = it->second;
    live.erase(it);
  }
  buffer.Detach();
  if (!a) return;
  if (a->pins > 0)
    a->released = true;
  else
    free_memory(env, a);
}

std::vector<Allocation*> pin(const std::vector<void*>& data) {
  std::vector<Allocation*> pinned;
  std::lock_guard<std::mutex> lock(registry_mutex);
  for (void* d : data) {
    auto it = live.find(d);
    if (it == live.end()) continue;
    ++it->second->pins;
    pinned.push_back(it->second);
  }
  return pinned;
}

void unpin(Napi::Env env, std::vector<Allocation*>& pinned) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  for (Allocation* a : pinned) {
    if (--a->pins > 0) continue;
    if (a->released || a->collected) free_memory(env, a);
    if (a->collected) delete a;
  }
  pinned.clear();
}

int64_t allocated_bytes() {
  std::lock_guard<std::mutex> lock(registry_mutex);
  return live_bytes;
}

}  // namespace nf::napi
