// The emulator's side of the warp-level matrix instructions (../mma.cuh), what only the emulator can
// show: its fixed summation order (bit-exact), the launch failures of a warp that does not arrive
// whole (a lane that exits, waits at a barrier, or runs another instruction or qualifier; a partial
// warp), bad addresses, the lanes whose ldmatrix addresses are not read, and cp.async as a deferred
// copy (poisoned destination until the wait_group of its group, copies landing at thread exit). The
// layouts themselves are tested by mma_test.cpp, on the emulator and on a GPU alike.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "../mma.cuh"
#include "../runtime.h"
#include "harness.h"
#include "emu_modes.h"

namespace {

using nf::cuda::launch;
using namespace nf::cuda;


float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// ------------------------------------------------------------------------------------------------
// The accumulation order: D = C, then fmaf over k = 0..K-1, bit for bit.

// Each lane passes its registers in lane-major order: a[lane][4], b[lane][2], c[lane][4] -> d[lane][4].
__global__ void mma_registers(int kind, const uint32_t* a, const uint32_t* b, const float* c, float* d) {
  const int lane = int(threadIdx.x);
  uint32_t ra[4] = {a[lane * 4], a[lane * 4 + 1], a[lane * 4 + 2], a[lane * 4 + 3]};
  uint32_t rb[2] = {b[lane * 2], b[lane * 2 + 1]};
  float rc[4] = {c[lane * 4], c[lane * 4 + 1], c[lane * 4 + 2], c[lane * 4 + 3]};
  if (kind == 0) mma_m16n8k16_bf16(rc, ra, rb, rc);  // d aliasing c, as accumulating kernels do
  else if (kind == 1) mma_m16n8k16_f16(rc, ra, rb, rc);
  else mma_m16n8k8_tf32(rc, ra, rb, rc);
  for (int i = 0; i < 4; ++i) d[lane * 4 + i] = rc[i];
}

float f16_value(uint16_t h) {  // normal and zero only (the test's values)
  const int e = (h >> 10) & 0x1f;
  const float m = float(h & 0x3ff);
  const float v = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024.0f + m, e - 25);
  return (h & 0x8000) ? -v : v;
}

NF_TEST(emulator_mma_fixed_summation_order) {
  std::mt19937 gen(7);
  std::uniform_int_distribution<uint32_t> bits;
  for (int kind = 0; kind < 3; ++kind) {
    std::vector<uint32_t> a(128), b(64);
    std::vector<float> c(128), d(128, -1.0f);
    // Random finite operands of mixed magnitudes (so the order of the sums matters).
    auto h16 = [&](bool f16) {
      const uint32_t r = bits(gen);
      const uint32_t exp = f16 ? 5 + r % 20 : 100 + r % 50;  // away from inf/NaN and subnormals
      return f16 ? ((r >> 16) & 0x8000u) | exp << 10 | (r & 0x3ffu) : ((r >> 16) & 0x8000u) | exp << 7 | (r & 0x7fu);
    };
    // (fp32: 2^-33 .. 2^29 with either sign, so no sum overflows.)
    auto f32 = [&] { return (bits(gen) % 0x1f000000u + 0x2f000000u) | (bits(gen) & 0x80000000u); };
    for (auto& x : a) x = kind == 2 ? f32() : h16(kind == 1) | h16(kind == 1) << 16;
    for (auto& x : b) x = kind == 2 ? f32() : h16(kind == 1) | h16(kind == 1) << 16;
    for (auto& x : c) x = bits_float(f32());
    NF_ASSERT(launch(mma_registers, 1, 32, 0, nullptr, kind, a.data(), b.data(), c.data(), d.data()) == cudaSuccess,
              why(cudaGetLastError()));
    // The matrices by the ISA's layouts, then the documented order.
    float A[16][16], B[16][8], C[16][8];
    auto half = [&](uint32_t reg, int h) {
      const uint16_t v = uint16_t(reg >> (16 * h));
      return kind == 0 ? bits_float(uint32_t(v) << 16) : f16_value(v);
    };
    for (int lane = 0; lane < 32; ++lane) {
      const int g = lane / 4, t = lane % 4;
      if (kind < 2) {
        for (int i = 0; i < 8; ++i)
          A[(i / 2) % 2 ? g + 8 : g][2 * t + i % 2 + (i >= 4 ? 8 : 0)] = half(a[size_t(lane * 4 + i / 2)], i % 2);
        for (int i = 0; i < 4; ++i) B[2 * t + i % 2 + (i >= 2 ? 8 : 0)][g] = half(b[size_t(lane * 2 + i / 2)], i % 2);
      } else {
        for (int i = 0; i < 4; ++i)
          A[i % 2 ? g + 8 : g][i < 2 ? t : t + 4] = bits_float(a[size_t(lane * 4 + i)] & 0xffffe000u);
        for (int i = 0; i < 2; ++i) B[t + 4 * i][g] = bits_float(b[size_t(lane * 2 + i)] & 0xffffe000u);
      }
      for (int i = 0; i < 4; ++i) C[i < 2 ? g : g + 8][2 * t + i % 2] = c[size_t(lane * 4 + i)];
    }
    const int K = kind == 2 ? 8 : 16;
    int bad = 0;
    for (int lane = 0; lane < 32; ++lane)
      for (int i = 0; i < 4; ++i) {
        const int m = i < 2 ? lane / 4 : lane / 4 + 8, n = 2 * (lane % 4) + i % 2;
        float acc = C[m][n];
        for (int k = 0; k < K; ++k) acc = std::fmaf(A[m][k], B[k][n], acc);
        bad += std::memcmp(&acc, &d[size_t(lane * 4 + i)], 4) != 0;
      }
    NF_EXPECT(bad == 0, "kind " + std::to_string(kind) + ": " + std::to_string(bad) +
                            " results differ from the documented order");
  }
}

// The conversions on the host (the emulator's spelling of cvt).
NF_TEST(emulator_mma_conversions) {
  NF_EXPECT(pack_bf16x2(1.0f, -2.0f) == 0xc0003f80u, "lo in the low half");
  NF_EXPECT(bf16_bits(bits_float(0x3f808000u)) == 0x3f80u, "tie to even (down)");
  NF_EXPECT(bf16_bits(bits_float(0x3f818000u)) == 0x3f82u, "tie to even (up)");
  NF_EXPECT(bf16_bits(bits_float(0x3f808001u)) == 0x3f81u, "above the tie");
  NF_EXPECT(std::isnan(bf16_value(bf16_bits(std::nanf("")))), "NaN");
  NF_EXPECT(to_tf32(bits_float(0x3f801000u)) == 0x3f802000u, "tf32 tie away from zero");
  NF_EXPECT(to_tf32(bits_float(0xbf801000u)) == 0xbf802000u, "tf32 tie away from zero (negative)");
  NF_EXPECT(to_tf32(bits_float(0x3f800fffu)) == 0x3f800000u, "tf32 below the tie");
  NF_EXPECT(to_tf32(INFINITY) == 0x7f800000u, "inf");
}

// ------------------------------------------------------------------------------------------------
// Launch failures.

struct alignas(16) Rows {
  uint16_t v[40][8];
};

// mode 0: lane 5 returns before the mma; 1: lane 5 waits at a barrier instead; 2: lanes 16-31 run
// the tf32 mma instead of the bf16 one; 3: all lanes, in a block whose second warp is partial.
__global__ void mma_broken(int mode, float* out) {
  const int lane = int(threadIdx.x) % 32;
  uint32_t a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
  float c[4] = {1, 2, 3, 4};
  if (mode == 0 && lane == 5) return;
  if (mode == 1 && lane == 5) {
    __syncthreads();
    return;
  }
  if (mode == 2 && lane >= 16) mma_m16n8k8_tf32(c, a, b, c);
  else mma_m16n8k16_bf16(c, a, b, c);
  out[threadIdx.x] = c[0];
}

// mode 0: lanes 16-31 use .x2 instead of .x4; 1: lane 3 asks for .trans; 2: lane 9's row address is
// misaligned; 3: lane 2's row is in global memory; 4: .x1 with lanes 8-31 giving null (not read: ok).
__global__ void ldmatrix_broken(int mode, const uint16_t* global, uint32_t* out) {
  NF_SHARED(Rows, rows);
  const int lane = int(threadIdx.x);
  for (int i = lane; i < 40 * 8; i += 32) rows.v[i / 8][i % 8] = uint16_t(i);
  __syncthreads();
  const void* row = &rows.v[lane][0];
  if (mode == 2 && lane == 9) row = &rows.v[lane][1];
  if (mode == 3 && lane == 2) row = global;
  if (mode == 4 && lane >= 8) row = nullptr;
  uint32_t r[4] = {};
  if (mode == 0 && lane >= 16) {
    uint32_t r2[2];
    ldmatrix<2>(r2, row);
  } else if (mode == 1 && lane == 3) {
    ldmatrix_trans<4>(r, row);
  } else if (mode == 4) {
    uint32_t r1[1];
    ldmatrix<1>(r1, row);
    r[0] = r1[0];
  } else {
    ldmatrix<4>(r, row);
  }
  out[lane] = r[0];
}

// mode 0: misaligned destination; 1: destination in global memory; 2: source in shared memory;
// 3: src-size 17.
__global__ void cp_async_broken(int mode, const float* src, float* global) {
  NF_SHARED(float[64], s);
  const int lane = int(threadIdx.x);
  if (mode == 0) cp_async_ca<8>(&s[2 * lane + 1], &src[2 * lane]);
  if (mode == 1) cp_async_ca<4>(&global[lane], &src[lane]);
  if (mode == 2) cp_async_ca<4>(&s[lane], &s[32 + lane]);
  if (mode == 3) cp_async_cg_zfill(&s[0], &src[0], 17);
  cp_async_commit();
  cp_async_wait<0>();
}

NF_TEST(emulator_mma_launch_failures) {
  for_each_mode([] {
    std::vector<float> out(64);
    std::vector<uint32_t> r(32);
    static Rows global_rows;  // 16-byte aligned, in global (host) memory
    const uint16_t* global = &global_rows.v[0][0];
    std::vector<float> src(64, 1.0f);
    auto expect_failure = [&](cudaError_t e, const char* needle, const char* what) {
      NF_EXPECT(e == cudaErrorLaunchFailure, what);
      NF_EXPECT(std::string(cudaGetErrorString(e)).find(needle) != std::string::npos,
                std::string(what) + ": " + cudaGetErrorString(e));
      cudaGetLastError();
    };
    expect_failure(launch(mma_broken, 1, 32, 0, nullptr, 0, out.data()), "has exited", "lane exits before mma");
    expect_failure(launch(mma_broken, 1, 32, 0, nullptr, 1, out.data()), "deadlock", "lane at a barrier");
    expect_failure(launch(mma_broken, 1, 32, 0, nullptr, 2, out.data()), "disagree", "bf16 vs tf32 mma");
    expect_failure(launch(mma_broken, 1, 48, 0, nullptr, 3, out.data()), "needs all 32 lanes", "partial warp");
    expect_failure(launch(ldmatrix_broken, 1, 32, 0, nullptr, 0, global, r.data()), "disagree", ".x4 vs .x2");
    expect_failure(launch(ldmatrix_broken, 1, 32, 0, nullptr, 1, global, r.data()), "disagree", ".trans");
    expect_failure(launch(ldmatrix_broken, 1, 32, 0, nullptr, 2, global, r.data()), "lane 9's row address",
                   "misaligned row");
    expect_failure(launch(ldmatrix_broken, 1, 32, 0, nullptr, 3, global, r.data()), "not in shared memory",
                   "global row");
    NF_EXPECT(launch(ldmatrix_broken, 1, 32, 0, nullptr, 4, global, r.data()) == cudaSuccess,
              ".x1 reads lanes 0-7 only: " + why(cudaGetLastError()));
    for (int lane = 0; lane < 32; ++lane)  // rows 0-7 of v: element (lane/4, 2(lane%4)) is lane/4*8 + 2(lane%4)
      NF_EXPECT(r[size_t(lane)] == (uint32_t(lane / 4 * 8 + 2 * (lane % 4)) |
                                    uint32_t(lane / 4 * 8 + 2 * (lane % 4) + 1) << 16),
                "x1 lane " + std::to_string(lane));
    expect_failure(launch(cp_async_broken, 1, 32, 0, nullptr, 0, src.data(), out.data()), "not aligned",
                   "cp.async misaligned");
    expect_failure(launch(cp_async_broken, 1, 32, 0, nullptr, 1, src.data(), out.data()),
                   "destination is not in shared", "cp.async to global");
    expect_failure(launch(cp_async_broken, 1, 32, 0, nullptr, 2, src.data(), out.data()), "source is in shared",
                   "cp.async from shared");
    expect_failure(launch(cp_async_broken, 1, 32, 0, nullptr, 3, src.data(), out.data()), "src-size", "src-size 17");
  });
}

// ------------------------------------------------------------------------------------------------
// cp.async lands at the wait_group of its group: before, the destination reads as poison.

// out[lane * 8 + step]: what the lane reads of its three destinations at each step.
__global__ void cp_async_timeline(const float* src, float* out) {
  NF_SHARED(float[4][32], s);
  const int lane = int(threadIdx.x);
  float* o = out + lane * 12;
  s[0][lane] = -1.0f, s[1][lane] = -1.0f, s[2][lane] = -1.0f, s[3][lane] = -1.0f;
  __syncthreads();  // (lanes 0-15 copy into the s[3] slots of lanes 16-31 below)
  cp_async_ca<4>(&s[0][lane], &src[lane]);  // group 0
  o[0] = s[0][lane];                        // in flight: poison
  cp_async_commit();
  cp_async_ca<4>(&s[1][lane], &src[32 + lane]);  // group 1
  cp_async_commit();
  cp_async_ca<4>(&s[2][lane], &src[64 + lane]);  // not committed
  cp_async_wait<2>();                            // both committed groups may still be in flight
  o[1] = s[0][lane], o[2] = s[1][lane];
  cp_async_wait<1>();  // group 0 has landed
  o[3] = s[0][lane], o[4] = s[1][lane];
  cp_async_wait<0>();  // group 1 too; the uncommitted copy is not waited for
  o[5] = s[1][lane], o[6] = s[2][lane];
  cp_async_commit();
  cp_async_wait<0>();
  o[7] = s[2][lane];
  // Lanes 0-15 issue a copy and return without waiting: it lands as they exit, before the barrier
  // the others pass once they have.
  if (lane < 16) {
    cp_async_ca<4>(&s[3][lane + 16], &src[96 + lane]);
    return;
  }
  __syncthreads();
  o[8] = s[3][lane];
}

NF_TEST(emulator_cp_async_lands_at_its_wait) {
  for_each_mode([] {
    std::vector<float> src(128), out(32 * 12, 0.0f);
    for (int i = 0; i < 128; ++i) src[size_t(i)] = float(i) + 0.5f;
    NF_ASSERT(launch(cp_async_timeline, 1, 32, 0, nullptr, src.data(), out.data()) == cudaSuccess,
              why(cudaGetLastError()));
    for (int lane = 0; lane < 32; ++lane) {
      const float* o = &out[size_t(lane * 12)];
      const std::string l = "lane " + std::to_string(lane) + ": ";
      NF_EXPECT(std::isnan(o[0]) && std::isnan(o[1]) && std::isnan(o[2]), l + "before the waits");
      NF_EXPECT(o[3] == src[size_t(lane)] && std::isnan(o[4]), l + "after wait_group 1");
      NF_EXPECT(o[5] == src[size_t(32 + lane)] && std::isnan(o[6]), l + "after wait_group 0");
      NF_EXPECT(o[7] == src[size_t(64 + lane)], l + "after commit and wait_group 0");
      if (lane >= 16) NF_EXPECT(o[8] == src[size_t(96 + lane - 16)], l + "copy of an exited thread");
    }
  });
}

}  // namespace
