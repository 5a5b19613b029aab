/** Timing inside a measurement process, and the statistics the report uses. */
import type { Repeat } from './protocol';

/** Seconds since an arbitrary origin (monotonic). */
export function now(): number {
  return Number(process.hrtime.bigint()) / 1e9;
}

/**
 * Runs `fn` `warmup` times untimed, then timed until `reps` timed runs or `budget` seconds of them
 * (always at least one). Reports each run to `onRun` as it ends; returns the timed runs' seconds.
 */
export async function repeat(fn: () => unknown, r: Repeat, onRun?: (seconds: number, warmup: boolean) => void): Promise<number[]> {
  const timed: number[] = [];
  let spent = 0;
  for (let i = 0; timed.length < r.reps && (timed.length === 0 || spent < r.budget); i++) {
    const t0 = now();
    await fn();
    const s = now() - t0;
    const warmup = i < r.warmup;
    onRun?.(s, warmup);
    if (!warmup) {
      timed.push(s);
      spent += s;
    }
  }
  return timed;
}

/**
 * `repeat` over pairs: each run times `a`, then `b`, so both see the same moment of a busy
 * machine and a[i] − b[i] is a paired difference. Returns the timed runs' seconds of each.
 */
export async function repeatPaired(a: () => unknown, b: () => unknown, r: Repeat): Promise<{ a: number[]; b: number[] }> {
  const out = { a: [] as number[], b: [] as number[] };
  let second = 0;
  await repeat(async () => {
    await a();
    const t0 = now();
    await b();
    second = now() - t0;
  }, r, (seconds, warmup) => {
    if (warmup) return;
    out.a.push(seconds - second);
    out.b.push(second);
  });
  return out;
}

/** The median of a non-empty list. */
export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b), m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}
