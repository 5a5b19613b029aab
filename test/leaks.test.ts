/**
 * No leaks: 2,000 training steps and 5,000 inference calls of a small model (half synchronous,
 * half asynchronous; half the outputs disposed, half left to the GC) grow the RSS of a fresh
 * process by less than 5% after warm-up.
 */
import { execFileSync } from 'node:child_process';

import { describe, expect, it } from 'vitest';

import { bundle, bundleEnv } from './support/bundle';

describe('leaks', () => {
  it('RSS grows < 5% over 2,000 training steps and 5,000 inference calls after warm-up', () => {
    const file = bundle('test/support/leak_loop.ts');
    const out = execFileSync(process.execPath, ['--expose-gc', file, '2000', '5000', '300'], { env: bundleEnv(), encoding: 'utf8' });
    const r = JSON.parse(out.trim().split('\n').pop()!) as { before: number; after: number; peak: number; growth: number; seconds: number; lastLoss: number };
    const mb = (b: number) => `${(b / 2 ** 20).toFixed(1)} MiB`;
    console.log(`RSS after warm-up ${mb(r.before)}, after the loop ${mb(r.after)} (growth ${(100 * r.growth).toFixed(2)}%), ` +
      `peak ${mb(r.peak)}; ${r.seconds.toFixed(1)} s; last loss ${r.lastLoss.toFixed(4)}`);
    expect(Number.isFinite(r.lastLoss)).toBe(true);
    expect(r.growth).toBeLessThan(0.05);
  });
});
