/** The machine's FP32 FMA peak, measured (see native/cpu/peak.h). */
export interface PeakOps {
  /**
   * Runs independent FMA chains on every pool thread in the active ISA, calibrated so one timed
   * run lasts at least `minSeconds` (default 0.2, at most 10), and writes the fastest of three
   * runs to `out`: [flops executed, seconds, threads], the seconds counted in the threads' own CPU
   * time (summed, divided by threads), so time preempted by other processes does not lower the
   * figure. Peak FLOP/s = out[0] / out[1].
   */
  fmaPeak(a: { minSeconds?: number; out: Float64Array }): void;
}
