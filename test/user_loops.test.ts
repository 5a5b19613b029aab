/**
 * Memory stays flat in loops written the way users write them (issue 11): the README's training
 * example as written (synchronous, nothing disposed, never yielding) for 20,000 steps, the same
 * loop through the async API, and `model.forward(x)` for 50,000 calls, synchronous and async, each
 * in a fresh child process with --expose-gc. RSS after warm-up (the floor of the second and third
 * tenths of the run) and at the end (the floor of the last three tenths) differ by < 5%
 * (Tensor.from + dispose: < 5 MiB).
 * Two children run at a time, one kernel thread each (2-core CI machines).
 */
import { execFile } from 'node:child_process';
import * as path from 'node:path';
import { promisify } from 'node:util';

import { describe, expect, it } from 'vitest';

import { bundle, bundleEnv, repoRoot } from './support/bundle';

interface LoopResult {
  loop: string;
  iterations: number;
  seconds: number;
  warmMiB: number;
  endMiB: number;
  growth: number;
  samples: { at: number; rssMiB: number }[];
}

/**
 * [loop, iterations, sample every, the growth limit]. The four loops of the issue must stay under
 * 5%; `Tensor.from` + `dispose` runs in a process of only ~50 MiB, where allocator and heap jitter
 * alone reach 2 MiB (4%), so its limit is absolute: 5 MiB over 100,000 calls (it was 32.5 MB).
 */
const loops: [name: string, iterations: number, sampleEvery: number, limit: (r: LoopResult) => boolean][] = [
  ['readme-train', 20_000, 1_000, (r) => r.growth < 0.05],
  ['infer', 50_000, 2_500, (r) => r.growth < 0.05],
  ['readme-train-async', 20_000, 1_000, (r) => r.growth < 0.05],
  ['infer-async', 50_000, 2_500, (r) => r.growth < 0.05],
  ['from-dispose', 100_000, 5_000, (r) => r.endMiB - r.warmMiB < 5],
];

const file = bundle('test/support/user_loops.ts');
const env = { ...bundleEnv(), NF_NUM_THREADS: '1' };
const run = async ([name, iterations, every]: (typeof loops)[number]): Promise<LoopResult> => {
  const { stdout } = await promisify(execFile)(process.execPath,
    ['--expose-gc', file, name, String(iterations), String(every), path.join(repoRoot, 'README.md')],
    { env, encoding: 'utf8', maxBuffer: 1 << 24 });
  return JSON.parse(stdout.trim().split('\n').pop()!) as LoopResult;
};

/** Starts every loop now, two at a time; each test awaits its own. */
function startAll(): Map<string, Promise<LoopResult>> {
  const results = new Map<string, Promise<LoopResult>>();
  let chain: Promise<unknown>[] = [Promise.resolve(), Promise.resolve()];
  loops.forEach((l, i) => {
    const p = chain[i % 2].then(() => run(l));
    chain[i % 2] = p.catch(() => undefined);
    results.set(l[0], p);
  });
  return results;
}

describe('memory stays flat in user-written loops', () => {
  const results = startAll();
  for (const [name, iterations, , withinLimit] of loops) {
    it(`${name}: ${iterations.toLocaleString('en')} iterations keep RSS flat after warm-up`, async () => {
      const r = await results.get(name)!;
      const curve = r.samples.filter((_, i) => i % 2 === 0 || i === r.samples.length - 1)
        .map((s) => `${s.at}:${s.rssMiB.toFixed(1)}`).join(' ');
      console.log(`${name}: RSS after warm-up ${r.warmMiB.toFixed(1)} MiB, at the end ${r.endMiB.toFixed(1)} MiB ` +
        `(${(100 * r.growth).toFixed(2)}%), ${r.seconds.toFixed(1)} s; iteration:MiB ${curve}`);
      expect(r.iterations).toBe(iterations);
      expect(withinLimit(r)).toBe(true);
    }, 600_000);
  }
});
