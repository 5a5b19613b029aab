import { afterAll, describe, expect, it } from 'vitest';

import { native } from '../lib/native';
import { dot, ErrorLog, f32, finiteDiffErr, isas, randn32, relErr, rng, withIsa } from './helpers';

const fwdLog = new ErrorLog(1e-5), bwdLog = new ErrorLog(1e-4);
afterAll(() => {
  fwdLog.report('layernorm forward, largest relative error');
  bwdLog.report('layernorm backward, largest relative error');
});

type Case = { rows: number; D: number; residual: boolean; dadd: boolean };
const cases: Case[] = [
  { rows: 1, D: 24, residual: false, dadd: false },
  { rows: 7, D: 72, residual: true, dadd: false },
  { rows: 65, D: 96, residual: false, dadd: true },
  { rows: 197 * 5, D: 40, residual: true, dadd: true },
  { rows: 3, D: 1, residual: false, dadd: false },
];

function reference(c: Case, x: Float64Array, res: Float64Array | null, g: Float64Array, b: Float64Array) {
  const out = new Float64Array(c.rows * c.D), mean = new Float64Array(c.rows), rstd = new Float64Array(c.rows);
  const sum = res ? new Float64Array(c.rows * c.D) : null;
  native.layernormForward({ rows: c.rows, D: c.D, out, mean, rstd, sum, x, residual: res, gamma: g, beta: b });
  return { out, mean, rstd, sum };
}

describe.each(isas)('layernorm (%s)', (isa) => {
  it.each(cases)('rows=$rows D=$D residual=$residual dadd=$dadd', (c) => {
    const r = rng(c.rows * 31 + c.D);
    const n = c.rows * c.D;
    const x = randn32(n, r, 2), res = c.residual ? randn32(n, r) : null;
    const g = randn32(c.D, r), b = randn32(c.D, r), dout = randn32(n, r), dadd = c.dadd ? randn32(n, r) : null;
    const ref = reference(c, x, res, g, b);
    const xin = ref.sum ?? x;
    const rdx = new Float64Array(n), rdg = new Float64Array(c.D), rdb = new Float64Array(c.D);
    native.layernormBackward({ rows: c.rows, D: c.D, dx: rdx, dgamma: rdg, dbeta: rdb, dout, dadd, x: xin,
      mean: ref.mean, rstd: ref.rstd, gamma: g });

    withIsa(isa, () => {
      const out = new Float32Array(n), mean = new Float32Array(c.rows), rstd = new Float32Array(c.rows);
      const sum = res ? new Float32Array(n) : null;
      native.layernormForward({ rows: c.rows, D: c.D, out, mean, rstd, sum, x: f32(x), residual: res && f32(res),
        gamma: f32(g), beta: f32(b) });
      expect(fwdLog.add(`${isa} out`, relErr(out, ref.out))).toBeLessThan(1e-5);
      expect(fwdLog.add(`${isa} rstd`, relErr(rstd, ref.rstd))).toBeLessThan(1e-5);
      const dx = new Float32Array(n), dg = new Float32Array(c.D).fill(0.5), db = new Float32Array(c.D).fill(-0.25);
      native.layernormBackward({ rows: c.rows, D: c.D, dx, dgamma: dg, dbeta: db, dout: f32(dout),
        dadd: dadd && f32(dadd), x: sum ?? f32(x), mean, rstd, gamma: f32(g) });
      expect(bwdLog.add(`${isa} dx`, relErr(dx, rdx))).toBeLessThan(1e-4);
      // Parameter gradients accumulate onto what was there.
      expect(bwdLog.add(`${isa} dgamma`, relErr(dg, rdg.map((v) => v + 0.5)))).toBeLessThan(1e-4);
      expect(bwdLog.add(`${isa} dbeta`, relErr(db, rdb.map((v) => v - 0.25)))).toBeLessThan(1e-4);
    });
  });
});

describe('layernorm reference', () => {
  it('matches finite differences of its own forward', () => {
    const c: Case = { rows: 5, D: 24, residual: true, dadd: false };
    const r = rng(7);
    const x = randn32(c.rows * c.D, r), res = randn32(c.rows * c.D, r);
    const g = randn32(c.D, r), b = randn32(c.D, r), w = randn32(c.rows * c.D, r);
    const loss = () => dot(reference(c, x, res, g, b).out, w);
    const ref = reference(c, x, res, g, b);
    const dx = new Float64Array(c.rows * c.D), dg = new Float64Array(c.D), db = new Float64Array(c.D);
    native.layernormBackward({ rows: c.rows, D: c.D, dx, dgamma: dg, dbeta: db, dout: w, x: ref.sum!,
      mean: ref.mean, rstd: ref.rstd, gamma: g });
    expect(finiteDiffErr(loss, x, dx, r)).toBeLessThan(1e-6);
    expect(finiteDiffErr(loss, res, dx, r)).toBeLessThan(1e-6);  // d(residual) = d(sum) = dx
    expect(finiteDiffErr(loss, g, dg, r)).toBeLessThan(1e-6);
    expect(finiteDiffErr(loss, b, db, r)).toBeLessThan(1e-6);
  });

  it('rejects bad arguments with errors naming them', () => {
    const ok = { rows: 2, D: 3, out: new Float32Array(6), mean: new Float32Array(2), rstd: new Float32Array(2),
      x: new Float32Array(6), gamma: new Float32Array(3), beta: new Float32Array(3) };
    expect(() => native.layernormForward({ ...ok, x: new Float32Array(5) })).toThrow(/layernormForward: .*length 6 for x/);
    expect(() => native.layernormForward({ ...ok, gamma: new Float64Array(3) })).toThrow(/Float32Array of length 3 for gamma/);
    expect(() => native.layernormForward({ ...ok, D: 0 })).toThrow(/for D/);
    expect(() => native.layernormForward({ ...ok, eps: NaN })).toThrow(/for eps/);
    expect(() => native.layernormForward({ ...ok, residual: new Float32Array(6) })).toThrow(/for sum/);
    // @ts-expect-error: deliberately wrong call
    expect(() => native.layernormForward(null)).toThrow(/expected one options object/);
    try {
      native.layernormForward({ ...ok, beta: undefined as unknown as Float32Array });
    } catch (e) {
      expect((e as { code?: string }).code).toBe('ERR_NF_INVALID_ARG');
    }
  });
});
