// Tests of the SIMT emulator itself: indices, barriers (with early-returning threads), static and
// dynamic shared memory and its poisoning, each shuffle pattern and the votes, atomics under
// contention, the errors it reports, and the runtime calls. Each SIMT test runs in every scheduling
// mode (for_each_mode).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "../runtime.h"
#include "harness.h"
#include "emu_modes.h"

namespace {

using nf::cuda::launch;

// ------------------------------------------------------------------------------------------------

__global__ void write_ids(unsigned* out) {
  const unsigned bx = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned tx = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned threads = blockDim.x * blockDim.y * blockDim.z;
  out[bx * threads + tx] = bx * 10000 + tx;
}

NF_TEST(emulator_indices) {
  for_each_mode([] {
    const dim3 grid(3, 2, 2), block(4, 3, 2);
    std::vector<unsigned> out(12 * 24, 0);
    NF_ASSERT(launch(write_ids, grid, block, 0, nullptr, out.data()) == cudaSuccess);
    for (unsigned b = 0; b < 12; ++b)
      for (unsigned t = 0; t < 24; ++t) NF_EXPECT(out[b * 24 + t] == b * 10000 + t);
  });
}

// Reverses each block's slice through shared memory: correct only if the barrier orders the
// writes before the reads.
__global__ void reverse_keyword(const float* in, float* out) {
  __shared__ float s[256];
  const unsigned t = threadIdx.x, n = blockDim.x, base = blockIdx.x * n;
  s[t] = in[base + t];
  __syncthreads();
  out[base + t] = s[n - 1 - t];
}

template <int N>
__global__ void reverse_macro(const float* in, float* out) {
  NF_SHARED(float[N], s);
  const unsigned t = threadIdx.x, base = blockIdx.x * N;
  s[t] = in[base + t];
  __syncthreads();
  out[base + t] = s[N - 1 - t];
}

__global__ void reverse_dynamic(const float* in, float* out) {
  NF_DYNAMIC_SHARED(float, s);
  const unsigned t = threadIdx.x, n = blockDim.x, base = blockIdx.x * n;
  s[t] = in[base + t];
  __syncthreads();
  out[base + t] = s[n - 1 - t];
}

bool reversed(const std::vector<float>& in, const std::vector<float>& out, int n) {
  for (size_t i = 0; i < in.size(); ++i)
    if (out[i] != in[i / n * n + (n - 1 - i % n)]) return false;
  return true;
}

NF_TEST(emulator_barrier_static_and_dynamic_shared) {
  for_each_mode([] {
    const int n = 64, blocks = 3;
    std::vector<float> in(n * blocks), out(n * blocks);
    for (size_t i = 0; i < in.size(); ++i) in[i] = float(i);
    NF_ASSERT(launch(reverse_keyword, blocks, n, 0, nullptr, in.data(), out.data()) == cudaSuccess);
    NF_EXPECT(reversed(in, out, n), "__shared__");
    NF_ASSERT(launch(reverse_macro<n>, blocks, n, 0, nullptr, in.data(), out.data()) == cudaSuccess);
    NF_EXPECT(reversed(in, out, n), "NF_SHARED");
    NF_ASSERT(launch(reverse_dynamic, blocks, n, n * sizeof(float), nullptr, in.data(), out.data()) == cudaSuccess);
    NF_EXPECT(reversed(in, out, n), "NF_DYNAMIC_SHARED");
  });
}

// Without the barrier the fibers read slots other threads have not written yet: poison (NaN).
NF_TEST(emulator_dropped_barrier_reads_poison) {
#ifdef __SANITIZE_THREAD__
  std::printf("    skipped: needs the deterministic fiber schedule (ThreadSanitizer runs OS threads)\n");
  return;
#endif
  const nf::emu::Options saved = nf::emu::options();
  nf::emu::options().os_threads = false;
  nf::emu::options().reverse = false;
  const int n = 64;
  std::vector<float> in(n), out(n);
  for (int i = 0; i < n; ++i) in[i] = float(i);
  for (auto kernel : {reverse_keyword, reverse_macro<n>, reverse_dynamic}) {
    nf::emu::clear_barrier_sites();
    nf::emu::options().drop_barrier.clear();
    NF_ASSERT(launch(kernel, 1, n, n * sizeof(float), nullptr, in.data(), out.data()) == cudaSuccess);
    NF_ASSERT(nf::emu::barrier_sites().size() == 1);
    nf::emu::options().drop_barrier = nf::emu::barrier_sites()[0];
    NF_ASSERT(launch(kernel, 1, n, n * sizeof(float), nullptr, in.data(), out.data()) == cudaSuccess);
    int nans = 0;
    for (float v : out) nans += std::isnan(v);
    // Threads 0..31 run before 32..63 have written the slots they read.
    NF_EXPECT(nans == n / 2, "expected half of the threads to read poison, got " + std::to_string(nans));
  }
  nf::emu::options() = saved;
}

// Threads that return early do not hold up later barriers (as CUDA treats exited threads).
__global__ void early_exit_sum(const float* in, float* out, unsigned active) {
  NF_SHARED(float[128], s);
  const unsigned t = threadIdx.x;
  if (t >= active) return;
  s[t] = in[t];
  __syncthreads();
  for (unsigned stride = 64; stride > 0; stride /= 2) {
    if (t < stride && t + stride < active) s[t] += s[t + stride];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = s[0];
}

NF_TEST(emulator_early_return_then_barriers) {
  for_each_mode([] {
    std::vector<float> in(128);
    for (int i = 0; i < 128; ++i) in[i] = float(i + 1);
    for (unsigned active : {1u, 37u, 100u, 128u}) {
      float out[2] = {0, 0};
      NF_ASSERT(launch(early_exit_sum, 2, 128, 0, nullptr, in.data(), out, active) == cudaSuccess);
      const float want = float(active * (active + 1) / 2);
      NF_EXPECT(out[0] == want && out[1] == want, std::to_string(active) + ": " + std::to_string(out[0]));
    }
  });
}

// ------------------------------------------------------------------------------------------------
// Warp operations: out[pattern][thread]

__global__ void shuffles(int* out, int n) {
  const int t = int(threadIdx.x), lane = t % 32;
  const int v = t * 3 + 1;
  int* o = out + t;
  o[0 * n] = __shfl_sync(0xffffffffu, v, 5);               // broadcast lane 5 of each warp
  o[1 * n] = __shfl_sync(0xffffffffu, v, lane + 3, 8);     // rotate within groups of 8
  o[2 * n] = __shfl_up_sync(0xffffffffu, v, 3);            // lanes < 3 keep their own
  o[3 * n] = __shfl_up_sync(0xffffffffu, v, 2, 16);
  o[4 * n] = __shfl_down_sync(0xffffffffu, v, 5);          // lanes > 26 keep their own
  o[5 * n] = __shfl_down_sync(0xffffffffu, v, 1, 4);
  o[6 * n] = __shfl_xor_sync(0xffffffffu, v, 1);
  o[7 * n] = __shfl_xor_sync(0xffffffffu, v, 6, 4);        // later groups out of reach: own value
  int s = v;                                               // butterfly sum: every lane gets the total
  for (int m = 16; m > 0; m /= 2) s += __shfl_xor_sync(0xffffffffu, s, m);
  o[8 * n] = s;
  o[9 * n] = int(__ballot_sync(0xffffffffu, lane % 3 == 0));
  o[10 * n] = __any_sync(0xffffffffu, lane == 7) + 2 * __all_sync(0xffffffffu, lane < 32) +
              4 * __all_sync(0xffffffffu, lane < 31);
  const double d = __shfl_sync(0xffffffffu, 0.5 * t, 31);  // 8-byte values
  o[11 * n] = int(d * 2);
  // Half-warp groups with their own masks.
  const unsigned half = lane < 16 ? 0x0000ffffu : 0xffff0000u;
  o[12 * n] = __shfl_down_sync(half, v, 8, 16);
  __syncwarp();
}

int expected_shuffle(int pattern, int t) {
  const int lane = t % 32, base = t - lane;
  auto v = [](int u) { return u * 3 + 1; };
  auto seg = [&](int w) { return lane / w * w; };
  switch (pattern) {
    case 0: return v(base + 5);
    case 1: return v(base + seg(8) + (lane + 3) % 8);
    case 2: return v(lane >= 3 ? t - 3 : t);
    case 3: return v(lane - seg(16) >= 2 ? t - 2 : t);
    case 4: return v(lane + 5 < 32 ? t + 5 : t);
    case 5: return v(lane - seg(4) + 1 < 4 ? t + 1 : t);
    case 6: return v(base + (lane ^ 1));
    case 7: return v((lane ^ 6) >= seg(4) + 4 ? t : base + (lane ^ 6));
    case 8: {
      int s = 0;
      for (int l = 0; l < 32; ++l) s += v(base + l);
      return s;
    }
    case 9: return int(0x49249249u);
    case 10: return 1 + 2;
    case 11: return base + 31;
    default: return v(lane - seg(16) + 8 < 16 ? t + 8 : t);
  }
}

NF_TEST(emulator_shuffle_patterns) {
  for_each_mode([] {
    const int n = 64, patterns = 13;
    std::vector<int> out(patterns * n, -7);
    NF_ASSERT(launch(shuffles, 1, n, 0, nullptr, out.data(), n) == cudaSuccess, why(cudaGetLastError()));
    for (int p = 0; p < patterns; ++p)
      for (int t = 0; t < n; ++t)
        NF_EXPECT(out[p * n + t] == expected_shuffle(p, t),
                  "pattern " + std::to_string(p) + " thread " + std::to_string(t) + ": " +
                      std::to_string(out[p * n + t]) + " vs " + std::to_string(expected_shuffle(p, t)));
  });
}

// ------------------------------------------------------------------------------------------------

__global__ void contend(int* count, float* fsum, double* dsum, int* imax, unsigned* lock, unsigned* locked_count,
                        unsigned long long* wide) {
  const int g = int(blockIdx.x * blockDim.x + threadIdx.x);
  atomicAdd(count, 1);
  atomicAdd(fsum, 0.5f);
  atomicAdd(dsum, double(g));
  atomicMax(imax, (g * 7919) % 1000);
  atomicAdd(wide, 1ull << 33);
  // A spin lock built from atomicCAS guarding a plain increment; one lane of each warp takes it at a
  // time (several lanes spinning at once would be SIMT-deadlock-prone on older GPUs).
  for (int lane = 0; lane < 32; ++lane) {
    if (int(threadIdx.x % 32) == lane) {
      while (atomicCAS(lock, 0u, 1u) != 0u) {
      }
      *locked_count += 1;
      __threadfence();
      atomicExch(lock, 0u);
    }
    __syncwarp();
  }
}

NF_TEST(emulator_atomics_under_contention) {
  for_each_mode([] {
    int count = 0, imax = -1;
    float fsum = 0;
    double dsum = 0;
    unsigned lock = 0, locked = 0;
    unsigned long long wide = 0;
    const int blocks = 4, threads = 256, n = blocks * threads;
    NF_ASSERT(launch(contend, blocks, threads, 0, nullptr, &count, &fsum, &dsum, &imax, &lock, &locked, &wide) ==
              cudaSuccess);
    int want_max = 0;
    for (int g = 0; g < n; ++g) want_max = std::max(want_max, (g * 7919) % 1000);
    NF_EXPECT(count == n);
    NF_EXPECT(fsum == 0.5f * n);
    NF_EXPECT(dsum == double(n) * (n - 1) / 2);
    NF_EXPECT(imax == want_max);
    NF_EXPECT(locked == unsigned(n) && lock == 0);
    NF_EXPECT(wide == (unsigned long long)n << 33);
  });
}

// ------------------------------------------------------------------------------------------------
// Errors the emulator reports instead of hanging or guessing.

__global__ void barrier_vs_shuffle(int* out) {
  if (threadIdx.x == 0) {
    __syncthreads();
  } else {
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, int(threadIdx.x), 1);
  }
}

__global__ void shuffle_with_exited_lane(int* out) {
  if (threadIdx.x == 3) return;
  out[threadIdx.x] = __shfl_sync(0xffffffffu, int(threadIdx.x), 0);
}

__global__ void shuffle_outside_mask(int* out) {
  out[threadIdx.x] = __shfl_sync(0x0000ffffu, int(threadIdx.x), 20, 32);
}

__global__ void partial_warp_full_mask(int* out) { out[threadIdx.x] = __shfl_down_sync(0xffffffffu, 1, 1); }

__global__ void nothing() {}

NF_TEST(emulator_reports_errors) {
  for_each_mode([] {
    std::vector<int> out(64);
    auto expect_failure = [&](cudaError_t e, const char* needle, const char* what) {
      NF_EXPECT(e == cudaErrorLaunchFailure, what);
      NF_EXPECT(cudaGetLastError() == cudaErrorLaunchFailure, what);
      NF_EXPECT(cudaGetLastError() == cudaSuccess, what);  // reading clears it
      NF_EXPECT(std::string(cudaGetErrorString(e)).find(needle) != std::string::npos,
                std::string(what) + ": " + cudaGetErrorString(e));
    };
    expect_failure(launch(barrier_vs_shuffle, 1, 32, 0, nullptr, out.data()), "deadlock", "barrier vs shuffle");
    expect_failure(launch(shuffle_with_exited_lane, 1, 32, 0, nullptr, out.data()), "exited", "exited lane");
    expect_failure(launch(shuffle_outside_mask, 1, 16, 0, nullptr, out.data()), "mask", "outside mask");
    expect_failure(launch(partial_warp_full_mask, 1, 40, 0, nullptr, out.data()), "beyond", "partial warp");
    NF_EXPECT(launch(nothing, 1, 1025, 0, nullptr) == cudaErrorInvalidConfiguration);
    const cudaError_t too_much_shared = launch(nothing, 1, 32, 100 * 1024, nullptr);
    NF_EXPECT(too_much_shared != cudaSuccess && cudaGetLastError() == too_much_shared);
    NF_EXPECT(launch(nothing, dim3(2, 2), dim3(8, 8), 0, nullptr) == cudaSuccess);
  });
}

// A CUDA error becomes a Status naming the op, the call and where it was made.
nf::Status failing_op() {
  NF_CUDA_TRY("failing_op", launch(nothing, 1, 2048, 0, nullptr));
  return nf::Status::Ok();
}

NF_TEST(emulator_status_from_cuda_errors) {
  const nf::Status st = failing_op();
  cudaGetLastError();
  NF_EXPECT(!st.ok() && st.op == "failing_op");
  NF_EXPECT(st.message.find("cudaErrorInvalidConfiguration") != std::string::npos, st.message);
  NF_EXPECT(st.message.find("emu_simt_test.cpp:") != std::string::npos, st.message);
}

// ------------------------------------------------------------------------------------------------

NF_TEST(emulator_runtime_calls) {
  float* d = nullptr;
  NF_ASSERT(cudaMalloc(&d, 10 * sizeof(float)) == cudaSuccess && d);
  NF_EXPECT(std::isnan(d[3]), "fresh device memory is poisoned");
  std::vector<float> h(10, 2.5f), back(10);
  cudaStream_t s;
  cudaEvent_t e0, e1;
  NF_ASSERT(cudaStreamCreate(&s) == cudaSuccess && cudaEventCreate(&e0) == cudaSuccess &&
            cudaEventCreate(&e1) == cudaSuccess);
  NF_EXPECT(cudaEventRecord(e0, s) == cudaSuccess);
  NF_EXPECT(cudaMemcpyAsync(d, h.data(), 10 * sizeof(float), cudaMemcpyHostToDevice, s) == cudaSuccess);
  NF_EXPECT(cudaMemsetAsync(d + 5, 0, 5 * sizeof(float), s) == cudaSuccess);
  NF_EXPECT(cudaMemcpy(back.data(), d, 10 * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
  NF_EXPECT(cudaEventRecord(e1, s) == cudaSuccess && cudaEventSynchronize(e1) == cudaSuccess);
  float ms = -1;
  NF_EXPECT(cudaEventElapsedTime(&ms, e0, e1) == cudaSuccess && ms >= 0);
  NF_EXPECT(back[4] == 2.5f && back[5] == 0.0f);
  NF_EXPECT(cudaStreamSynchronize(s) == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess);
  NF_EXPECT(cudaEventDestroy(e0) == cudaSuccess && cudaEventDestroy(e1) == cudaSuccess);
  NF_EXPECT(cudaStreamDestroy(s) == cudaSuccess);
  NF_EXPECT(cudaFree(d) == cudaSuccess);
  NF_EXPECT(cudaFree(d) == cudaErrorInvalidValue, "double free");
  NF_EXPECT(cudaGetLastError() == cudaErrorInvalidValue);
}

}  // namespace
