/**
 * fmaPeak, the FMA-peak measurement behind the benchmark's "% of peak": it runs on every ISA
 * variant and thread count and reports consistent figures (no speed assertions: the machine may
 * be busy), sync and async, and rejects bad arguments.
 */
import { describe, expect, it } from 'vitest';

import { native } from '../lib/native/addon';
import { isas, withIsa } from './helpers';

describe('fmaPeak', () => {
  it.each(isas)('measures FMA chains on %s with every pool thread', (isa) => {
    withIsa(isa, () => {
      const out = new Float64Array(3);
      native.fmaPeak({ minSeconds: 0.005, out });
      const [flops, seconds, threads] = out;
      expect(flops).toBeGreaterThan(0);
      expect(seconds).toBeGreaterThan(0);
      expect(threads).toBe(native.numThreads());
      expect(Number.isFinite(flops / seconds)).toBe(true);
    });
  });

  it('runs on one thread too, and asynchronously', async () => {
    const before = native.numThreads();
    native.setNumThreads(1);
    try {
      const out = new Float64Array(3);
      await native.fmaPeakAsync({ minSeconds: 0.005, out });
      expect(out[2]).toBe(1);
      expect(out[0]).toBeGreaterThan(0);
    } finally {
      native.setNumThreads(before);
    }
  });

  it('rejects a bad output array or run length', () => {
    const out = new Float64Array(3);
    expect(() => native.fmaPeak({ out: new Float64Array(2) })).toThrow(/fmaPeak: .*Float64Array of length 3 for out/);
    expect(() => native.fmaPeak({ out: new Float32Array(3) as unknown as Float64Array })).toThrow(/for out/);
    expect(() => native.fmaPeak({ minSeconds: 0, out })).toThrow(/for minSeconds/);
    expect(() => native.fmaPeak({ minSeconds: 11, out })).toThrow(/for minSeconds/);
    expect(() => native.fmaPeak({ minSeconds: -1, out })).toThrow(expect.objectContaining({ code: 'ERR_NF_INVALID_ARG' }));
  });
});
