/**
 * The tensor-memory cache: freed blocks serve later requests of the same size class, so a steady
 * training loop allocates nothing new from the system after its first steps; the cap on idle
 * bytes holds; emptyCache() returns idle blocks; bad arguments are clear errors.
 */
import { afterAll, describe, expect, it } from 'vitest';

import { AdamW, native, Tensor, trainStep, trainStepAsync, ViTClassifier } from '../lib';
import { Random } from '../lib/random';

const defaultLimit = native.allocatorStats().cacheLimit;
afterAll(() => native.setCacheLimit(defaultLimit));

describe('block cache', () => {
  it('serves a freed block to the next request of the same size class', () => {
    const a = native.allocate(10_000);
    native.release(a);
    const before = native.allocatorStats();
    const b = native.allocate(9_000); // same class as 10,000 (8,192 < n <= 10,240)
    const after = native.allocatorStats();
    expect(after.reused).toBe(before.reused + 1);
    expect(after.fresh).toBe(before.fresh);
    expect(new Uint8Array(b).every((v) => v === 0)).toBe(true); // a reused block is zero-filled again
    native.release(b);
  });

  it('a steady training loop reuses every activation block after warm-up', async () => {
    const rng = new Random(5);
    const m = new ViTClassifier({ imgSize: 12, patchSize: 4, inChannels: 3, numClasses: 5, dModel: 48, numHeads: 2, dFF: 72,
      depth: 2, dropout: 0.1, seed: 3 });
    const opt = new AdamW(m.parameters(), { lr: 1e-3 });
    const x = Tensor.from(rng.normalArray(3 * 3 * 144, 1), [3, 3, 12, 12]), y = Tensor.from(Int32Array.from([0, 4, 2]), [3]);
    for (let i = 0; i < 3; i++) trainStep(m, opt, x, y);
    await trainStepAsync(m, opt, x, y);
    const before = native.allocatorStats();
    for (let i = 0; i < 5; i++) trainStep(m, opt, x, y);
    for (let i = 0; i < 5; i++) await trainStepAsync(m, opt, x, y);
    const after = native.allocatorStats();
    console.log(`10 training steps after warm-up: ${after.reused - before.reused} blocks reused, ${after.fresh - before.fresh} fresh`);
    expect(after.fresh - before.fresh).toBe(0);
    expect(after.reused - before.reused).toBeGreaterThan(100);
    m.dispose();
    opt.dispose();
    for (const t of [x, y]) t.dispose();
  });

  it('keeps at most the cap idle and gives idle blocks back on emptyCache()', () => {
    native.setCacheLimit(1 << 20);
    const blocks = Array.from({ length: 8 }, () => native.allocate(300_000));
    for (const b of blocks) native.release(b);
    expect(native.allocatorStats().cachedBytes).toBeLessThanOrEqual(1 << 20);
    native.emptyCache();
    expect(native.allocatorStats().cachedBytes).toBe(0);
    native.setCacheLimit(0);
    const before = native.allocatorStats();
    native.release(native.allocate(5_000));
    native.release(native.allocate(5_000));
    expect(native.allocatorStats().fresh).toBe(before.fresh + 2);
  });

  it('rejects bad cache limits, naming the argument', () => {
    for (const bad of [-1, 1.5, Number.NaN, '1' as unknown as number]) {
      expect(() => native.setCacheLimit(bad)).toThrow(/setCacheLimit: expected a non-negative integer for bytes/);
    }
  });
});
