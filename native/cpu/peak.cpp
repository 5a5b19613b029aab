// FP32 FMA peak: K independent accumulator chains per thread, acc = acc * a + b, which keeps
// both FMA pipes busy when K >= latency x pipes (Zen 3/4, Skylake: 4 cycles x 2 pipes = 8).
// K = 16 with AVX-512 (32 registers), 12 with AVX2 (16 registers), 16 with NEON (32 registers;
// 4 cycles x 4 pipes on a Neoverse V1). The scalar variant targets
// baseline x86-64, which has no FMA instruction (std::fma would be a library call): it runs a
// separate multiply and add, 12 chains to cover their latency on two multiply and two add pipes,
// so its peak is the machine's scalar arithmetic peak. Every chain step counts as 2 FLOPs.
// a < 1 and b > 0 keep every chain at a finite fixed point, whatever the run length.
// Time is each thread's own CPU time, summed over the chunks it ran: on a shared machine a
// thread preempted by another process would otherwise stretch the run (2 Zen 3 cores at load 7
// measured 51-70 GFLOP/s by wall time against 94 GFLOP/s for one idle core's chains).
#include "peak.h"

#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>

#include "../core/threadpool.h"
#include "isa.h"

namespace nf::cpu::NF_ISA_NS {
#include "simd.h"

namespace {

#if NF_AVX512
constexpr int K = 16;
inline vf chain_step(vf acc, vf a, vf b) { return vfma(acc, a, b); }
#elif NF_ISA == 3
constexpr int K = 16;
inline vf chain_step(vf acc, vf a, vf b) { return vfma(acc, a, b); }
#elif NF_ISA == 1
constexpr int K = 12;
inline vf chain_step(vf acc, vf a, vf b) { return vfma(acc, a, b); }
#else
constexpr int K = 12;
inline vf chain_step(vf acc, vf a, vf b) { return acc * a + b; }
#endif

// K independent chains acc = Step(acc, a, b) of `iters` steps from `seed`; their sum. The FMA chains
// take a = 0.999, b = 0.001; the vdpbf16ps ones read a = 0.5, b = 0.001 as bf16 pairs (0.5 and 0,
// 0.001 and a tiny low half): both stay finite whatever the run length.
template <vf (*Step)(vf, vf, vf)>
float run_chains(int64_t iters, float seed, float a_value = 0.999f, float b_value = 0.001f) {
  vf acc[K];
  for (int k = 0; k < K; ++k) acc[k] = vset1(seed + 0.001f * static_cast<float>(k));
  const vf a = vset1(a_value), b = vset1(b_value);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int k = 0; k < K; ++k) acc[k] = Step(acc[k], a, b);
  }
  vf s = acc[0];
  for (int k = 1; k < K; ++k) s = vadd(s, acc[k]);
  return vsum(s);
}

}  // namespace

double bf16_dot_rate(int64_t iters) {
#if NF_BF16_DOT
  // Best of three of each (a preemption only lengthens a run); the dot product is 4 FLOPs a lane.
  double fma_s = 1e30, dot_s = 1e30;
  volatile float keep = 0.0f;
  for (int rep = 0; rep < 3; ++rep) {
    double t0 = thread_cpu_seconds();
    keep = keep + run_chains<chain_step>(iters, 1.0f);
    fma_s = std::min(fma_s, thread_cpu_seconds() - t0);
    t0 = thread_cpu_seconds();
    keep = keep + run_chains<vdot_bf16>(iters, 1.0f, 0.5f);
    dot_s = std::min(dot_s, thread_cpu_seconds() - t0);
  }
  return dot_s > 0.0 ? 2.0 * fma_s / dot_s : 0.0;
#else
  (void)iters;
  return 0.0;
#endif
}

void fma_chains(int64_t chunks, int64_t iters, double* flops, double* cpu_seconds, float* sink) {
  std::atomic<float> total{0.0f};
  std::atomic<double> busy{0.0};
  parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    const double t0 = thread_cpu_seconds();
    float s = 0.0f;
    for (int64_t c = c0; c < c1; ++c) s += run_chains<chain_step>(iters, static_cast<float>(c % 7));
    const double dt = thread_cpu_seconds() - t0;
    float cur = total.load();
    while (!total.compare_exchange_weak(cur, cur + s)) {
    }
    double b = busy.load();
    while (!busy.compare_exchange_weak(b, b + dt)) {
    }
  });
  *sink = total.load();
  *cpu_seconds = busy.load();
  *flops = 2.0 * K * W * static_cast<double>(iters) * static_cast<double>(chunks);
}

}  // namespace nf::cpu::NF_ISA_NS

#ifdef NF_ISA_PRIMARY
namespace nf::cpu {

namespace {

// One timed run of `chunks` x `iters` on the active ISA: {flops, CPU seconds per thread}.
void timed_run(int64_t chunks, int64_t iters, int threads, double* flops, double* seconds) {
  float sink = 0.0f;
  double cpu_seconds = 0.0;
  NF_DISPATCH(fma_chains, chunks, iters, flops, &cpu_seconds, &sink);
  volatile float keep = sink;  // the result is observable, so the chains must run
  (void)keep;
  *seconds = cpu_seconds / threads;
}

}  // namespace

double thread_cpu_seconds() {
#ifdef CLOCK_THREAD_CPUTIME_ID
  timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0) return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
#endif
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Status fma_peak(double min_seconds, FmaPeakResult* out) {
  NF_CHECK(min_seconds > 0.0 && min_seconds <= 10.0, "fma_peak", "min_seconds must be in (0, 10]");
  const int threads = num_threads();
  // Several chunks per thread, claimed dynamically: a thread that starts late or is preempted
  // by another process leaves its share to the others instead of stretching the run.
  const int64_t chunks = 8 * static_cast<int64_t>(threads);
  int64_t iters = 1 << 12;
  double flops = 0.0, seconds = 0.0;
  // Calibration: double the run length until one run takes a quarter of the target.
  for (;;) {
    timed_run(chunks, iters, threads, &flops, &seconds);
    if (seconds >= min_seconds / 4 || iters >= (int64_t(1) << 40)) break;
    const double grow = seconds > 0.0 ? std::min(16.0, std::max(2.0, min_seconds / seconds)) : 16.0;
    iters = static_cast<int64_t>(static_cast<double>(iters) * grow);
  }
  iters = static_cast<int64_t>(static_cast<double>(iters) * std::max(1.0, min_seconds / std::max(seconds, 1e-9)));
  double best_rate = 0.0;
  for (int rep = 0; rep < 3; ++rep) {
    timed_run(chunks, iters, threads, &flops, &seconds);
    const double rate = flops / seconds;
    if (rate > best_rate) {
      best_rate = rate;
      out->flops = flops;
      out->seconds = seconds;
    }
  }
  out->threads = threads;
  return Status::Ok();
}

Status run(const ops::FmaPeak<float>& p) {
  FmaPeakResult r;
  NF_TRY(fma_peak(p.min_seconds, &r));
  p.out[0] = r.flops;
  p.out[1] = r.seconds;
  p.out[2] = r.threads;
  return Status::Ok();
}

}  // namespace nf::cpu

namespace nf {

double bf16_dot_ratio() {
#if NF_X86
  static const double ratio = isa_runs(Isa::avx512bf16) ? cpu::avx512bf16::bf16_dot_rate(20000) : 0.0;
  return ratio;
#else
  return 0.0;
#endif
}

bool bf16_dot_pays() {
  const double ratio = bf16_dot_ratio();
  return ratio == 0.0 || ratio > 1.0;
}

}  // namespace nf
#endif
#include "isa_end.h"
