import { afterAll, describe, expect, it } from 'vitest';

import { native } from '../lib/native/addon';
import type { Activation } from '../lib/native/ops.generated';
import { dot, ErrorLog, f32, finiteDiffErr, isas, randn32, relErr, rng, withIsa } from './helpers';

const fwdLog = new ErrorLog(1e-5), bwdLog = new ErrorLog(1e-4);
afterAll(() => {
  fwdLog.report('linear forward, largest relative error');
  bwdLog.report('linear backward, largest relative error');
});

type Case = { rows: number; inFeatures: number; outFeatures: number; act: Activation; bias: boolean };
const cases: Case[] = [
  { rows: 1, inFeatures: 24, outFeatures: 72, act: 'none', bias: true },
  { rows: 7, inFeatures: 72, outFeatures: 24, act: 'relu', bias: true },
  { rows: 65, inFeatures: 96, outFeatures: 40, act: 'gelu', bias: false },
  { rows: 197, inFeatures: 40, outFeatures: 96, act: 'gelu_tanh', bias: true },
  { rows: 197 * 5, inFeatures: 96, outFeatures: 72, act: 'gelu', bias: true },
  { rows: 300, inFeatures: 1, outFeatures: 1, act: 'none', bias: true },
];

type Arrays = { y: Float64Array; preact: Float64Array; dx: Float64Array; dW: Float64Array; db: Float64Array };

describe.each(cases)('linear rows=$rows in=$inFeatures out=$outFeatures act=$act bias=$bias', (c) => {
  const dims = { rows: c.rows, inFeatures: c.inFeatures, outFeatures: c.outFeatures };
  const nx = c.rows * c.inFeatures, ny = c.rows * c.outFeatures, nw = c.outFeatures * c.inFeatures;
  const r = rng(c.rows * 7 + c.inFeatures * 3 + c.outFeatures);
  const x = randn32(nx, r), W = randn32(nw, r, 0.2), b = c.bias ? randn32(c.outFeatures, r) : null;
  const dy = randn32(ny, r), dW0 = randn32(nw, r), db0 = randn32(c.outFeatures, r);
  const ref: Arrays = {
    y: new Float64Array(ny), preact: new Float64Array(ny), dx: new Float64Array(nx),
    dW: Float64Array.from(dW0), db: Float64Array.from(db0),
  };
  native.linearForward({ ...dims, act: c.act, y: ref.y, preact: ref.preact, x, W, b });
  native.linearBackward({ ...dims, dx: ref.dx, dW: ref.dW, db: c.bias ? ref.db : null, dy, x, W });

  it.each(isas)('%s matches the float64 reference', (isa) => {
    withIsa(isa, () => {
      const y = new Float32Array(ny), preact = new Float32Array(ny);
      native.linearForward({ ...dims, act: c.act, y, preact, x: f32(x), W: f32(W), b: b && f32(b) });
      expect(fwdLog.add(`${isa} y`, relErr(y, ref.y))).toBeLessThan(1e-5);
      expect(fwdLog.add(`${isa} preact`, relErr(preact, ref.preact))).toBeLessThan(1e-5);
      const y2 = new Float32Array(ny);  // without preact: same y
      native.linearForward({ ...dims, act: c.act, y: y2, x: f32(x), W: f32(W), b: b && f32(b) });
      expect(y2).toEqual(y);

      // Parameter gradients accumulate onto what is there; dx is overwritten.
      const dx = new Float32Array(nx).fill(7), dW = f32(dW0), db = f32(db0);
      native.linearBackward({ ...dims, dx, dW, db: c.bias ? db : null, dy: f32(dy), x: f32(x), W: f32(W) });
      expect(bwdLog.add(`${isa} dx`, relErr(dx, ref.dx))).toBeLessThan(1e-4);
      expect(bwdLog.add(`${isa} dW`, relErr(dW, ref.dW))).toBeLessThan(1e-4);
      if (c.bias) expect(bwdLog.add(`${isa} db`, relErr(db, ref.db))).toBeLessThan(1e-4);
      else expect(db).toEqual(f32(db0));

      const dW2 = f32(dW0);  // dx: null skips the input gradient
      native.linearBackward({ ...dims, dx: null, dW: dW2, dy: f32(dy), x: f32(x), W: f32(W) });
      expect(dW2).toEqual(dW);
    });
  });
});

describe('linear reference', () => {
  it('matches finite differences of its own forward', () => {
    const dims = { rows: 5, inFeatures: 7, outFeatures: 6 };
    const r = rng(11);
    const x = randn32(35, r), W = randn32(42, r), b = randn32(6, r), w = randn32(30, r);
    const loss = () => {
      const y = new Float64Array(30);
      native.linearForward({ ...dims, y, x, W, b });
      return dot(y, w);
    };
    const dx = new Float64Array(35), dW = new Float64Array(42), db = new Float64Array(6);
    native.linearBackward({ ...dims, dx, dW, db, dy: w, x, W });
    expect(finiteDiffErr(loss, x, dx, r)).toBeLessThan(1e-6);
    expect(finiteDiffErr(loss, W, dW, r)).toBeLessThan(1e-6);
    expect(finiteDiffErr(loss, b, db, r)).toBeLessThan(1e-6);
  });

  it('writes the activation of preact, for every activation', () => {
    const dims = { rows: 9, inFeatures: 5, outFeatures: 11 };
    const r = rng(3);
    const x = randn32(45, r), W = randn32(55, r), b = randn32(11, r);
    const plain = new Float64Array(99);
    native.linearForward({ ...dims, y: plain, x, W, b });
    const tanh = (v: number) => 0.5 * v * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (v + 0.044715 * v ** 3)));
    const expected: Record<Activation, (v: number) => number> = {
      none: (v) => v, relu: (v) => Math.max(v, 0), gelu_tanh: tanh, silu: (v) => v / (1 + Math.exp(-v)), tanh: Math.tanh,
      gelu: (v) => {  // x Φ(x) by Simpson's rule on the normal density: independent of erf
        const steps = 2000, lo = -12, hVal = (v - lo) / steps;
        let s = 0;
        for (let i = 0; i <= steps; i++) {
          const t = lo + i * hVal, f = Math.exp(-t * t / 2) / Math.sqrt(2 * Math.PI);
          s += f * (i === 0 || i === steps ? 1 : i % 2 ? 4 : 2);
        }
        return v * s * hVal / 3;
      },
    };
    for (const act of Object.keys(expected) as Activation[]) {
      const y = new Float64Array(99), preact = new Float64Array(99);
      native.linearForward({ ...dims, act, y, preact, x, W, b });
      expect(relErr(preact, plain)).toBeLessThan(1e-15);
      expect(relErr(y, plain.map(expected[act]))).toBeLessThan(1e-9);
    }
  });

  it('does nothing for rows = 0', () => {
    const e = new Float32Array(0), dW = new Float32Array(6).fill(1), db = new Float32Array(2).fill(1);
    native.linearForward({ rows: 0, inFeatures: 3, outFeatures: 2, y: e, x: e, W: new Float32Array(6) });
    native.linearBackward({ rows: 0, inFeatures: 3, outFeatures: 2, dx: e, dW, db, dy: e, x: e,
      W: new Float32Array(6) });
    expect([...dW, ...db]).toEqual(Array(8).fill(1));
  });

  it('rejects bad arguments with errors naming them', () => {
    const fwd = { rows: 2, inFeatures: 3, outFeatures: 4, y: new Float32Array(8), x: new Float32Array(6),
      W: new Float32Array(12) };
    expect(() => native.linearForward({ ...fwd, W: new Float32Array(11) })).toThrow(/linearForward: .*length 12 for W/);
    expect(() => native.linearForward({ ...fwd, b: new Float32Array(3) })).toThrow(/length 4 for b/);
    expect(() => native.linearForward({ ...fwd, preact: new Float64Array(8) }))
      .toThrow(/Float32Array of length 8 for preact/);
    expect(() => native.linearForward({ ...fwd, inFeatures: 0 })).toThrow(/for inFeatures/);
    expect(() => native.linearForward({ ...fwd, rows: -2 })).toThrow(/for rows/);
    expect(() => native.linearForward({ ...fwd, act: 'swish' as Activation })).toThrow(/for act/);
    const bwd = { rows: 2, inFeatures: 3, outFeatures: 4, dx: new Float32Array(6), dW: new Float32Array(12),
      dy: new Float32Array(8), x: new Float32Array(6), W: new Float32Array(12) };
    expect(() => native.linearBackward({ ...bwd, dx: new Float32Array(5) }))
      .toThrow(/linearBackward: .*length 6 for dx/);
    expect(() => native.linearBackward({ ...bwd, db: new Float32Array(5) })).toThrow(/length 4 for db/);
    expect(() => native.linearBackward({ ...bwd, dy: new Float64Array(8) })).toThrow(/Float32Array of length 8 for dy/);
    expect(() => native.linearBackward({ ...bwd, outFeatures: 2.5 })).toThrow(/for outFeatures/);
    expect(() => native.linearBackward({ ...bwd, dW: null as unknown as Float32Array }))
      .toThrow(/for dW but received null/);
    // @ts-expect-error: deliberately wrong call
    expect(() => native.linearBackward()).toThrow(/expected one options object/);
  });
});
