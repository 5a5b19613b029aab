// The machine's FP32 FMA peak, measured (native/cpu/peak.h): benchmarks divide achieved GFLOP/s by it.
#pragma once
#include <cstdint>

#include "schema.h"

namespace nf::ops {

template <class T>
struct FmaPeak {
  static constexpr const char* name = "fmaPeak";
  static constexpr const char* summary =
      "Runs independent FMA chains on every pool thread in the active ISA, calibrated so one timed run lasts at "
      "least `minSeconds` (default 0.2, at most 10), and writes the fastest of three runs to `out`: [flops "
      "executed, seconds, threads], the seconds counted in the threads' own CPU time (summed, divided by "
      "threads), so time preempted by other processes does not lower the figure. Peak FLOP/s = out[0] / out[1].";
  // A measurement of the host CPU, not a function of its inputs: nothing for a device to run.
  static constexpr bool host_only = true;
  double min_seconds = 0.2;
  double* out = nullptr;

  template <class R>
  static void fields(R& r, FmaPeak& p) {
    r.number(p.min_seconds, "minSeconds", 0.2, 1e-3, 10.0);
    r.out(p.out, "out", Shape("[3]", 3));
  }
};

}  // namespace nf::ops
