/**
 * Where our step's time goes, measured inside the step: a few extra runs of the benchmark's own
 * step with every native op of the CPU addon timed (wall time of each call), so the report can set
 * the time spent in the ops against the step's (what is left: the JS between the ops, the
 * garbage collector, allocation). Run after the timed runs, never during them (the wrapping costs
 * a clock read per op).
 */
import { wrapOps } from '../test/support/ops_called';
import { now } from './sampling';

/** Milliseconds per step: the whole step, and each native op (summed over its calls) with its calls per step. */
export interface StepBreakdown {
  stepMs: number;
  ops: { op: string; ms: number; calls: number }[];
}

/** Runs `step` `runs` times with every native op timed; every figure is a mean per step (the ops' calls lie inside the steps). */
export async function stepBreakdown(step: () => unknown, runs: number): Promise<StepBreakdown> {
  const totals = new Map<string, { s: number; calls: number }>();
  const undo = wrapOps((name, call) => {
    const t0 = now();
    try {
      return call();
    } finally {
      const e = totals.get(name) ?? { s: 0, calls: 0 };
      e.s += now() - t0;
      e.calls++;
      totals.set(name, e);
    }
  }, false);
  let stepSeconds = 0;
  try {
    for (let i = 0; i < runs; i++) {
      const t0 = now();
      await step();
      stepSeconds += now() - t0;
    }
  } finally {
    undo();
  }
  const ops = [...totals].map(([op, e]) => ({ op, ms: (1e3 * e.s) / runs, calls: e.calls / runs })).sort((a, b) => b.ms - a.ms);
  return { stepMs: (1e3 * stepSeconds) / runs, ops };
}
