// The machine's FP32 FMA peak, measured: independent FMA chains on every thread of the pool, in
// the active ISA's vector width. Benchmarks divide achieved GFLOP/s by it ("% of FMA peak").
#pragma once
#include <cstdint>

#include "../ops/peak.h"
#include "kernel_decl.h"

namespace nf::cpu {

struct FmaPeakResult {
  double flops = 0.0;    // floating-point operations executed (one FMA = 2)
  double seconds = 0.0;  // how long the run takes with every thread running all the time (see fma_peak)
  int threads = 0;       // pool threads that ran the chains
};

// Calibrates the run length so one timed run lasts at least `min_seconds` (at most 10), then
// keeps the fastest of three timed runs. Reports the flops of that run and its length measured
// in the threads' own CPU time (their summed CPU seconds / threads), so that time a thread spent
// preempted by other processes does not count: on a busy machine the figure is still the peak
// of the machine's cores (on an idle one it equals the wall time). Peak FLOP/s = flops / seconds.
Status fma_peak(double min_seconds, FmaPeakResult* out);

// The fmaPeak op (native/ops/peak.h): out = [flops, seconds, threads] of fma_peak.
Status run(const ops::FmaPeak<float>& p);

// The calling thread's CPU time in seconds (wall time where the platform has no thread clock).
double thread_cpu_seconds();

// `chunks` chunks of `iters` iterations, spread over the pool; each iteration of a chunk is one
// FMA on every lane of each independent accumulator. Writes the flops executed to *flops, the
// CPU seconds the threads spent in the chunks to *cpu_seconds, and a value derived from the
// accumulators to *sink, so the chains cannot be optimised away.
NF_KERNEL_DECL(void fma_chains(int64_t chunks, int64_t iters, double* flops, double* cpu_seconds, float* sink))

// The calling thread's FLOP rate of `vdpbf16ps` chains over that of FMA chains (each K chains of
// `iters` steps, timed in the thread's CPU time): above 1 where the BF16 dot product beats the fp32
// FMA (Zen 4: about 2), below where it does not (an Intel Xeon measured 0.5). 0 in a variant
// without the dot product. bf16_dot_pays (native/core/cpu_features.h) reads it at load.
NF_KERNEL_DECL(double bf16_dot_rate(int64_t iters))

}  // namespace nf::cpu
