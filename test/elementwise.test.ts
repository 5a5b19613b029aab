import { afterAll, describe, expect, it } from 'vitest';

import { native } from '../lib/native/addon';
import { ErrorLog, f32, isas, randn32, relErr, rng, withIsa } from './helpers';

const fwdLog = new ErrorLog(1e-5);
afterAll(() => fwdLog.report('elementwise, largest relative error'));

// 1 and 7: tails only; 65 and 197*5*40+3: vectors plus a tail; 100003: several threads' chunks.
const sizes = [1, 7, 65, 197 * 5 * 40 + 3, 100_003];

/** The first index where a and b differ (-1 when equal): faster than toEqual on long arrays. */
function firstDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) return 0;
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) return i;
  return -1;
}

function dropoutRef(n: number, p: number, seed: number, offset: number, x: Float64Array): Float64Array {
  const out = new Float64Array(n);
  native.dropoutForward({ n, p, seed, offset, out, x });
  return out;
}

describe.each(isas)('add / accumulate (%s)', (isa) => {
  it.each(sizes)('n=%i', (n) => {
    const r = rng(n);
    const a = randn32(n, r), b = randn32(n, r);
    const ref = new Float64Array(n);
    native.add({ n, out: ref, a, b });
    withIsa(isa, () => {
      const out = new Float32Array(n);
      native.add({ n, out, a: f32(a), b: f32(b) });
      expect(fwdLog.add(`${isa} add`, relErr(out, ref))).toBeLessThan(1e-5);
      const inPlace = f32(a);  // out aliasing a: the residual add x = x + y
      native.add({ n, out: inPlace, a: inPlace, b: f32(b) });
      expect(firstDiff(inPlace, out)).toBe(-1);
      const y = f32(a);
      native.accumulate({ n, y, x: f32(b) });
      expect(fwdLog.add(`${isa} accumulate`, relErr(y, ref))).toBeLessThan(1e-5);
    });
    const y64 = Float64Array.from(a);
    native.accumulate({ n, y: y64, x: b });
    expect(firstDiff(y64, ref)).toBe(-1);
  });
});

describe.each(isas)('dropout (%s)', (isa) => {
  it('p = 0 is the identity', () => {
    const n = 1001, x = f32(randn32(n, rng(1)));
    withIsa(isa, () => {
      const out = new Float32Array(n), dx = new Float32Array(n);
      native.dropoutForward({ n, p: 0, seed: 3, offset: 4, out, x });
      native.dropoutBackward({ n, p: 0, seed: 3, offset: 4, dx, dout: x });
      expect(firstDiff(out, x)).toBe(-1);
      expect(firstDiff(dx, x)).toBe(-1);
    });
  });

  it.each([
    { n: 1, p: 0.5, seed: 0, offset: 0 },
    { n: 7, p: 0.1, seed: 1, offset: 2 },
    { n: 65, p: 0.9, seed: 2 ** 40 + 5, offset: 7 },
    { n: 100_003, p: 0.25, seed: 42, offset: 2 ** 52 },
  ])('n=$n p=$p: same mask as the reference, backward reuses it', ({ n, p, seed, offset }) => {
    const r = rng(n + 17);
    const x = randn32(n, r), dout = randn32(n, r);
    const ref = dropoutRef(n, p, seed, offset, x);
    const refBack = new Float64Array(n);
    native.dropoutBackward({ n, p, seed, offset, dx: refBack, dout });
    withIsa(isa, () => {
      const out = new Float32Array(n), dx = new Float32Array(n);
      native.dropoutForward({ n, p, seed, offset, out, x: f32(x) });
      expect(firstDiff(out.map((v) => +(v === 0)), ref.map((v) => +(v === 0)))).toBe(-1);  // same mask
      expect(fwdLog.add(`${isa} dropout out`, relErr(out, ref))).toBeLessThan(1e-5);
      native.dropoutBackward({ n, p, seed, offset, dx, dout: f32(dout) });
      expect(firstDiff(dx.map((v) => +(v === 0)), out.map((v) => +(v === 0)))).toBe(-1);  // the forward's mask
      expect(fwdLog.add(`${isa} dropout dx`, relErr(dx, refBack))).toBeLessThan(1e-5);
      const inPlace = f32(x);  // out aliasing x
      native.dropoutForward({ n, p, seed, offset, out: inPlace, x: inPlace });
      expect(firstDiff(inPlace, out)).toBe(-1);
    });
  });

  it('keeps 1 - p of a million elements; other seeds and offsets draw other masks', () => {
    const n = 1_000_003, p = 0.3;
    const x = new Float32Array(n).fill(1);
    withIsa(isa, () => {
      const masks = [[7, 0], [7, 1], [8, 0]].map(([seed, offset]) => {
        const out = new Float32Array(n);
        native.dropoutForward({ n, p, seed, offset, out, x });
        return out;
      });
      const kept = masks[0].reduce((k, v) => k + (v !== 0 ? 1 : 0), 0);
      const sigma = Math.sqrt(p * (1 - p) / n);
      expect(Math.abs(kept / n - (1 - p))).toBeLessThan(5 * sigma);
      expect(masks[0].find((v) => v !== 0)).toBe(Math.fround(1 / (1 - p)));
      for (const other of masks.slice(1)) {
        let same = 0;
        for (let i = 0; i < n; i++) same += (masks[0][i] === 0) === (other[i] === 0) ? 1 : 0;
        // Independent masks agree where both keep or both drop: (1-p)² + p² of the time.
        expect(Math.abs(same / n - ((1 - p) ** 2 + p ** 2))).toBeLessThan(0.005);
      }
    });
  });
});

describe('elementwise arguments', () => {
  it('rejects bad arguments with errors naming them', () => {
    const x = new Float32Array(4), out = new Float32Array(4);
    const ok = { n: 4, p: 0.5, seed: 1, offset: 2, out, x };
    expect(() => native.dropoutForward({ ...ok, p: 1 })).toThrow(/dropoutForward: .*for p/);
    expect(() => native.dropoutForward({ ...ok, p: 0.99999999999 })).toThrow(/\[0, 1\) for p/);
    expect(() => native.dropoutForward({ ...ok, p: -0.1 })).toThrow(/for p/);
    expect(() => native.dropoutForward({ ...ok, p: NaN })).toThrow(/for p/);
    expect(() => native.dropoutForward({ ...ok, seed: -1 })).toThrow(/for seed/);
    expect(() => native.dropoutForward({ ...ok, seed: 1.5 })).toThrow(/for seed/);
    expect(() => native.dropoutForward({ ...ok, offset: 2 ** 53 })).toThrow(/for offset/);
    expect(() => native.dropoutForward({ ...ok, offset: undefined as unknown as number })).toThrow(/for offset/);
    expect(() => native.dropoutForward({ ...ok, x: new Float32Array(3) })).toThrow(/length 4 for x/);
    expect(() => native.dropoutForward({ ...ok, out: new Float64Array(4) })).toThrow(/Float32Array of length 4 for out/);
    expect(() => native.dropoutBackward({ n: 4, p: 0.5, seed: 1, offset: 2, dx: out, dout: null as unknown as Float32Array }))
      .toThrow(/dropoutBackward: .*for dout/);
    expect(() => native.add({ n: 4, out, a: x, b: new Int32Array(4) as unknown as Float32Array })).toThrow(/add: .*for b/);
    expect(() => native.add({ n: -1, out, a: x, b: x })).toThrow(/for n/);
    expect(() => native.accumulate({ n: 4, y: new Float32Array(5), x })).toThrow(/accumulate: .*length 4 for y/);
    // @ts-expect-error: deliberately wrong call
    expect(() => native.accumulate(7)).toThrow(/expected one options object/);
  });
});
