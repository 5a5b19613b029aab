/** DistributedSampler (lib/distributed/sampler.ts): pure TypeScript, checked with explicit rank/worldSize (no MPI needed). */
import { describe, expect, it } from 'vitest';

import { DistributedSampler } from '../lib';

function shares(n: number, w: number, opts: { shuffle?: boolean; seed?: number; dropLast?: boolean }, epoch = 0): number[][] {
  return [...Array(w).keys()].map((rank) => {
    const s = new DistributedSampler(n, { ...opts, rank, worldSize: w });
    s.setEpoch(epoch);
    return Array.from(s.indices());
  });
}

describe('DistributedSampler', () => {
  for (const [n, w] of [[10, 2], [10, 3], [7, 4], [3, 5], [100, 3]] as const) {
    it(`covers every index exactly once across ${w} ranks (n = ${n}), padding by wrap-around`, () => {
      const s = shares(n, w, { seed: 3 });
      const per = Math.ceil(n / w);
      for (const share of s) expect(share.length).toBe(per);
      const all = s.flat();
      expect(all.length).toBe(per * w);
      const counts = new Map<number, number>();
      for (const i of all) counts.set(i, (counts.get(i) ?? 0) + 1);
      for (let i = 0; i < n; i++) expect(counts.get(i)).toBeGreaterThanOrEqual(1);
      expect([...counts.keys()].every((i) => i >= 0 && i < n)).toBe(true);
      // only the padding repeats: exactly per·w − n extra draws
      expect([...counts.values()].reduce((a, c) => a + c - 1, 0)).toBe(per * w - n);
    });

    it(`dropLast: equal disjoint shares of floor(n / w) (n = ${n}, w = ${w})`, () => {
      const s = shares(n, w, { seed: 1, dropLast: true });
      const all = s.flat();
      for (const share of s) expect(share.length).toBe(Math.floor(n / w));
      expect(new Set(all).size).toBe(all.length);
    });
  }

  it('reshuffles per epoch, identically on every rank (same seed)', () => {
    const e0 = shares(50, 2, { seed: 7 }, 0), e1 = shares(50, 2, { seed: 7 }, 1);
    expect(e0).not.toEqual(e1);
    expect(shares(50, 2, { seed: 7 }, 1)).toEqual(e1); // a second "rank process" computes the same
    expect(new Set(e1.flat()).size).toBe(50);
    expect(shares(50, 2, { seed: 8 }, 1)).not.toEqual(e1);
  });

  it('without shuffle reads rank, rank + w, ...', () => {
    expect(shares(5, 2, { shuffle: false })).toEqual([[0, 2, 4], [1, 3, 0]]);
  });

  it('defaults to one rank before distributed.init, and validates its arguments', () => {
    const s = new DistributedSampler(4, { shuffle: false });
    expect([...s]).toEqual([0, 1, 2, 3]);
    expect(() => new DistributedSampler(4, { rank: 2, worldSize: 2 })).toThrow(/options.rank/);
    expect(() => new DistributedSampler(-1)).toThrow(/datasetSize/);
    expect(() => new DistributedSampler(4, { bogus: 1 } as never)).toThrow();
  });
});
