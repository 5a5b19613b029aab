// The CUDA backend's device layer: memory, copies and synchronisation on the backend's stream
// (one per device, created on first use). Everything returns an nf::Status; a failing CUDA call
// becomes an error naming the call and its file:line. Pointers called "device" here are what the
// backend's ops take (in the emulator build, host memory standing in for the device's).
// Public: no CUDA types, so the binding and tests include it with a plain C++ compiler.
#pragma once
#include <cstddef>

#include "../core/status.h"

namespace nf::cuda {

// Number of usable devices (an error, not 0, when the driver or runtime is missing).
Status device_count(int* n);

// Device memory of `bytes` (contents unspecified), and its release (null is fine).
Status device_alloc(void** ptr, size_t bytes);
Status device_free(void* ptr);

// Copies on the backend's stream. copy_to_host waits for the copy (and all earlier work).
Status copy_to_device(void* dst, const void* src, size_t bytes);
Status copy_to_host(void* dst, const void* src, size_t bytes);
Status copy_on_device(void* dst, const void* src, size_t bytes);
Status fill_zero(void* dst, size_t bytes);

// Waits for all work queued on the backend's stream.
Status synchronize();

// Frees the backend's cached scratch buffers (the stream stays).
Status release_workspace();

}  // namespace nf::cuda
