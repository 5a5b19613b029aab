import { afterAll, describe, expect, it } from 'vitest';

import { native } from '../lib/native/addon';
import { FeedForward, Tensor } from '../lib/index';
import { FeedForwardActivations, type FeedforwardForwardArgs, type FeedForwardActivation, type FloatArray } from '../lib/native/ops.generated';
import { dot, ErrorLog, f32, failure, finiteDiffErr, isas, randn32, relErr, rng, withIsa } from './helpers';

/** The dims, activation and dropout of a feed-forward call. */
type FeedForwardDims = Pick<FeedforwardForwardArgs, 'rows' | 'D' | 'F' | 'activation' | 'dropout' | 'seed' | 'offset'>;

const fwdLog = new ErrorLog(1e-5), bwdLog = new ErrorLog(1e-4);
afterAll(() => {
  fwdLog.report('feedforward forward, largest relative error');
  bwdLog.report('feedforward backward, largest relative error');
});

type Dims = Required<FeedForwardDims>;
type Params = { x: Float64Array; W1: Float64Array; b1: Float64Array; W2: Float64Array; b2: Float64Array };

const activations: FeedForwardActivation[] = [...FeedForwardActivations]; // every one the op takes
const shapes = [
  { rows: 1, D: 24, F: 40 },
  { rows: 7, D: 72, F: 96 },
  { rows: 65, D: 96, F: 200 },
  { rows: 197, D: 40, F: 72 },
];
// Every activation on every shape, with and without dropout.
const cases: Dims[] = shapes.flatMap((s, i) => activations.map((activation, j) =>
  ({ ...s, activation, dropout: [0, 0.1, 0.4][(i + j) % 3], seed: 1234 + i, offset: 7 * j })));
cases.push({ rows: 197 * 5, D: 96, F: 384, activation: 'gelu', dropout: 0.1, seed: 99, offset: 3 });

function params(d: Dims, seed: number): Params {
  const r = rng(seed);
  return { x: randn32(d.rows * d.D, r), W1: randn32(d.F * d.D, r, 1 / Math.sqrt(d.D)), b1: randn32(d.F, r, 0.5),
    W2: randn32(d.D * d.F, r, 1 / Math.sqrt(d.F)), b2: randn32(d.D, r, 0.5) };
}

/** Forward in float64 (make = Float64Array: the reference) or float32 (the active ISA's kernel). */
function forward<A extends FloatArray>(d: FeedForwardDims, p: Params, make: (n: number) => A) {
  const conv = (v: Float64Array) => { const o = make(v.length); o.set(v); return o; };
  const y = make(d.rows * d.D), h = make(d.rows * d.F), a = make(d.rows * d.F);
  native.feedforwardForward({ ...d, y, h, a, x: conv(p.x), W1: conv(p.W1), b1: conv(p.b1), W2: conv(p.W2),
    b2: conv(p.b2) });
  return { y, h, a };
}
const f64fwd = (d: FeedForwardDims, p: Params) => forward(d, p, (n) => new Float64Array(n));
const f32fwd = (d: FeedForwardDims, p: Params) => forward(d, p, (n) => new Float32Array(n));

describe.each(isas)('feedforward (%s)', (isa) => {
  it.each(cases)('rows=$rows D=$D F=$F $activation dropout=$dropout', (d) => {
    const p = params(d, d.rows * 31 + d.D + d.F);
    const r = rng(d.F);
    const dy = randn32(d.rows * d.D, r);
    const ref = f64fwd(d, p);
    const g = { dx: new Float64Array(d.rows * d.D), dW1: new Float64Array(d.F * d.D), db1: new Float64Array(d.F),
      dW2: new Float64Array(d.D * d.F), db2: new Float64Array(d.D) };
    native.feedforwardBackward({ ...d, ...g, dy, x: p.x, h: ref.h, a: ref.a, W1: p.W1, W2: p.W2 });

    withIsa(isa, () => {
      const got = f32fwd(d, p);
      expect(fwdLog.add(`${isa} y`, relErr(got.y, ref.y))).toBeLessThan(1e-5);
      expect(fwdLog.add(`${isa} h`, relErr(got.h, ref.h))).toBeLessThan(1e-5);
      expect(fwdLog.add(`${isa} a`, relErr(got.a, ref.a))).toBeLessThan(1e-5);
      if (d.activation !== 'relu') {  // gelu is non-zero off h = 0: a zero in a is a dropped element
        const dropped = (a: ArrayLike<number>) => Array.from(a, (v) => v === 0);
        expect(dropped(got.a)).toEqual(dropped(ref.a));
      }
      // Parameter gradients accumulate onto what was there.
      const dx = new Float32Array(d.rows * d.D).fill(7), dW1 = new Float32Array(d.F * d.D).fill(0.5);
      const db1 = new Float32Array(d.F).fill(-0.25), dW2 = new Float32Array(d.D * d.F).fill(0.125);
      const db2 = new Float32Array(d.D).fill(1);
      native.feedforwardBackward({ ...d, dx, dW1, db1, dW2, db2, dy: f32(dy), x: f32(p.x), h: got.h, a: got.a,
        W1: f32(p.W1), W2: f32(p.W2) });
      expect(bwdLog.add(`${isa} dx`, relErr(dx, g.dx))).toBeLessThan(1e-4);
      expect(bwdLog.add(`${isa} dW1`, relErr(dW1, g.dW1.map((v) => v + 0.5)))).toBeLessThan(1e-4);
      expect(bwdLog.add(`${isa} db1`, relErr(db1, g.db1.map((v) => v - 0.25)))).toBeLessThan(1e-4);
      expect(bwdLog.add(`${isa} dW2`, relErr(dW2, g.dW2.map((v) => v + 0.125)))).toBeLessThan(1e-4);
      expect(bwdLog.add(`${isa} db2`, relErr(db2, g.db2.map((v) => v + 1)))).toBeLessThan(1e-4);
    });
  });
});

// Without dropout the activation's backward runs in the epilogue of dh's product (gemm's act_grad);
// it must give the bits of the product and a pass after it: linearBackward, activationBackward,
// linearBackward.
describe.each(isas)('feedforward backward, act\' fused into dh = dy W2 (%s)', (isa) => {
  it.each(activations.flatMap((activation) => (['fp32', 'bf16'] as const).map((precision) => ({ activation, precision }))))(
    '$activation $precision: the bits of the ops one after another', ({ activation, precision }) => {
      const d = { rows: 197, D: 40, F: 72, activation, dropout: 0, seed: 1, offset: 0 };
      const p = params(d, 5), r = rng(11), dy = f32(randn32(d.rows * d.D, r));
      const x = f32(p.x), W1 = f32(p.W1), W2 = f32(p.W2);
      withIsa(isa, () => {
        const { h, a } = forward({ ...d, precision } as FeedForwardDims, p, (n) => new Float32Array(n));
        const fused = { dx: new Float32Array(d.rows * d.D), dW1: new Float32Array(d.F * d.D), db1: new Float32Array(d.F),
          dW2: new Float32Array(d.D * d.F), db2: new Float32Array(d.D) };
        native.feedforwardBackward({ ...d, precision, ...fused, dy, x, h, a, W1, W2 });
        const dh = new Float32Array(d.rows * d.F), dW2 = new Float32Array(d.D * d.F), db2 = new Float32Array(d.D);
        native.linearBackward({ rows: d.rows, inFeatures: d.F, outFeatures: d.D, precision, dx: dh, dW: dW2, db: db2, dy, x: a, W: W2 });
        native.activationBackward({ n: dh.length, act: activation, dx: dh, dy: dh, x: h });
        const dx = new Float32Array(d.rows * d.D), dW1 = new Float32Array(d.F * d.D), db1 = new Float32Array(d.F);
        native.linearBackward({ rows: d.rows, inFeatures: d.D, outFeatures: d.F, precision, dx, dW: dW1, db: db1, dy: dh, x, W: W1 });
        expect(fused.dx).toEqual(dx);
        expect(fused.dW1).toEqual(dW1);
        expect(fused.db1).toEqual(db1);
        expect(fused.dW2).toEqual(dW2);
        expect(fused.db2).toEqual(db2);
      });
    });
});

describe('feedforward dropout', () => {
  const base: Dims = { rows: 65, D: 24, F: 200, activation: 'gelu', dropout: 0, seed: 42, offset: 5 };
  const p = params(base, 3);

  it('p = 0 is no dropout, whatever the seed', () => {
    const noDropout: FeedForwardDims = { rows: base.rows, D: base.D, F: base.F };  // activation defaults to gelu
    for (const fwd of [f64fwd, f32fwd]) {
      const plain = fwd(noDropout, p), zero = fwd({ ...base, seed: 77, offset: 1 }, p);
      expect(zero.y).toEqual(plain.y);
      expect(zero.a).toEqual(plain.a);
      expect(Array.from(zero.a).every((v) => v !== 0)).toBe(true);
    }
  });

  it.each([0.1, 0.5, 0.9])('p = %s keeps about 1 - p, scaled by 1/(1-p), the same mask in both precisions', (q) => {
    const ref0 = f64fwd(base, p), ref = f64fwd({ ...base, dropout: q }, p);
    const n = ref.a.length;
    let kept = 0, scaleErr = 0;
    for (let i = 0; i < n; i++) {
      if (ref.a[i] === 0) continue;
      kept++;
      scaleErr = Math.max(scaleErr, Math.abs(ref.a[i] * (1 - Math.fround(q)) - ref0.a[i]));
    }
    expect(scaleErr).toBeLessThan(1e-12);
    expect(Math.abs(kept / n - (1 - q))).toBeLessThan(4 * Math.sqrt(q * (1 - q) / n));
    for (const isa of isas) {
      withIsa(isa, () => {
        const got = f32fwd({ ...base, dropout: q }, p);
        expect(Array.from(got.a, (v) => v === 0)).toEqual(Array.from(ref.a, (v) => v === 0));
        expect(relErr(got.y, ref.y)).toBeLessThan(1e-5);
      });
    }
  });

  it('another seed or offset draws another mask', () => {
    const mask = (d: Dims) => Array.from(f64fwd(d, p).a, (v) => v === 0);
    const m = mask({ ...base, dropout: 0.5 });
    expect(mask({ ...base, dropout: 0.5, seed: 43 })).not.toEqual(m);
    expect(mask({ ...base, dropout: 0.5, offset: 6 })).not.toEqual(m);
    expect(mask({ ...base, dropout: 0.5 })).toEqual(m);
  });

  it('h may be omitted when no backward follows', () => {
    const d = { ...base, dropout: 0.3 };
    const full = f32fwd(d, p);
    const y = new Float32Array(d.rows * d.D), a = new Float32Array(d.rows * d.F);
    native.feedforwardForward({ ...d, y, h: null, a, x: f32(p.x), W1: f32(p.W1), b1: f32(p.b1), W2: f32(p.W2),
      b2: f32(p.b2) });
    expect(y).toEqual(full.y);
    expect(a).toEqual(full.a);
  });

  it('p = 1 drops everything: y = b2', () => {
    const out = f32fwd({ ...base, dropout: 1 }, p);
    expect(out.a.every((v) => v === 0)).toBe(true);
    const b2 = f32(p.b2);
    for (let r = 0; r < base.rows; r++) expect(relErr(out.y.subarray(r * base.D, (r + 1) * base.D), b2)).toBe(0);
  });
});

describe('the FeedForward layer', () => {
  it.each(FeedForwardActivations)("takes activation '%s' and computes the op's float64 reference with it", (activation) => {
    const m = new FeedForward({ dModel: 6, dFF: 10, activation, seed: 3 });
    const x = Float32Array.from(randn32(4 * 6, rng(8)));
    const y = m.forward(Tensor.from(x, [4, 6])).toArray();
    const ref = new Float64Array(24);
    const w = (t: Tensor) => Float64Array.from(t.toArray() as Float32Array);
    native.feedforwardForward({ rows: 4, D: 6, F: 10, activation, y: ref, a: new Float64Array(40), x: Float64Array.from(x),
      W1: w(m.fc1.weight), b1: w(m.fc1.bias!), W2: w(m.fc2.weight), b2: w(m.fc2.bias!) });
    expect(relErr(y, ref)).toBeLessThan(1e-5);
  });

  it('forward(x, residual) adds the residual: the same values as forward(x) plus it, at bf16 on the CPU too', () => {
    const x = Tensor.from(Float32Array.from(randn32(5 * 8, rng(9))), [5, 8]);
    const r = Tensor.from(Float32Array.from(randn32(5 * 8, rng(10))), [5, 8]);
    for (const precision of ['fp32', 'bf16'] as const) {
      for (const training of [false, true]) {  // (bf16 training: the ops on bf16, r float32: added after)
        const m = new FeedForward({ dModel: 8, dFF: 12, seed: 4 }).setPrecision(precision);
        if (!training) m.eval();
        const plain = m.forward(x).toArray() as Float32Array, y = m.forward(x, r).toArray() as Float32Array;
        const want = plain.map((v, i) => v + (r.data as Float32Array)[i]);
        expect(y, `${precision} ${training ? 'train' : 'eval'}`).toEqual(want);
      }
    }
    const m = new FeedForward({ dModel: 8, dFF: 12, seed: 4 });
    const e = failure(() => m.forward(x, Tensor.zeros([5, 7])));
    expect([e?.code, e?.message]).toEqual(['ERR_NF_INVALID_ARG', expect.stringMatching(/residual/)]);
    const ok = { rows: 2, D: 3, F: 4, y: new Float32Array(6), a: new Float32Array(8), x: new Float32Array(6),
      W1: new Float32Array(12), b1: new Float32Array(4), W2: new Float32Array(12), b2: new Float32Array(3) };
    expect(() => native.feedforwardForward({ ...ok, residual: ok.y })).toThrow(/residual must not be y itself/);
  });
});

describe('feedforward reference', () => {
  it.each(activations)('matches finite differences of its own forward (%s, dropout 0.3)', (activation) => {
    const d: Dims = { rows: 5, D: 8, F: 12, activation, dropout: 0.3, seed: 11, offset: 2 };
    const p = params(d, 17);
    const r = rng(5);
    const w = randn32(d.rows * d.D, r);
    const loss = () => dot(f64fwd(d, p).y, w);
    const { h, a } = f64fwd(d, p);
    const g = { dx: new Float64Array(d.rows * d.D), dW1: new Float64Array(d.F * d.D), db1: new Float64Array(d.F),
      dW2: new Float64Array(d.D * d.F), db2: new Float64Array(d.D) };
    native.feedforwardBackward({ ...d, ...g, dy: w, x: p.x, h, a, W1: p.W1, W2: p.W2 });
    expect(finiteDiffErr(loss, p.x, g.dx, r)).toBeLessThan(1e-6);
    expect(finiteDiffErr(loss, p.W1, g.dW1, r)).toBeLessThan(1e-6);
    expect(finiteDiffErr(loss, p.b1, g.db1, r)).toBeLessThan(1e-6);
    expect(finiteDiffErr(loss, p.W2, g.dW2, r)).toBeLessThan(1e-6);
    expect(finiteDiffErr(loss, p.b2, g.db2, r)).toBeLessThan(1e-6);
  });

  it('rejects bad arguments with errors naming them', () => {
    const f = () => new Float32Array(6);
    const ok = { rows: 2, D: 3, F: 4, y: f(), h: new Float32Array(8), a: new Float32Array(8), x: f(),
      W1: new Float32Array(12), b1: new Float32Array(4), W2: new Float32Array(12), b2: new Float32Array(3) };
    expect(() => native.feedforwardForward(ok)).not.toThrow();
    expect(() => native.feedforwardForward({ ...ok, x: new Float32Array(5) })).toThrow(/feedforwardForward: .*length 6 for x/);
    expect(() => native.feedforwardForward({ ...ok, W2: new Float64Array(12) })).toThrow(/Float32Array of length 12 for W2/);
    expect(() => native.feedforwardForward({ ...ok, F: 0 })).toThrow(/for F/);
    expect(() => native.feedforwardForward({ ...ok, D: 2.5 })).toThrow(/for D/);
    expect(() => native.feedforwardForward({ ...ok, activation: 'swish' as FeedForwardActivation })).toThrow(/for activation/);
    expect(() => native.feedforwardForward({ ...ok, dropout: 1.5 })).toThrow(/for dropout/);
    expect(() => native.feedforwardForward({ ...ok, dropout: NaN })).toThrow(/for dropout/);
    expect(() => native.feedforwardForward({ ...ok, seed: -1 })).toThrow(/for seed/);
    expect(() => native.feedforwardForward({ ...ok, b1: null as unknown as Float32Array })).toThrow(/for b1/);
    // @ts-expect-error: deliberately wrong call
    expect(() => native.feedforwardForward(null)).toThrow(/expected one options object/);
    const bwd = { rows: 2, D: 3, F: 4, dx: f(), dW1: new Float32Array(12), db1: new Float32Array(4),
      dW2: new Float32Array(12), db2: new Float32Array(3), dy: f(), x: f(), h: new Float32Array(8),
      a: new Float32Array(8), W1: new Float32Array(12), W2: new Float32Array(12) };
    expect(() => native.feedforwardBackward(bwd)).not.toThrow();
    expect(() => native.feedforwardBackward({ ...bwd, h: undefined as unknown as Float32Array })).toThrow(/for h/);
    expect(() => native.feedforwardBackward({ ...bwd, db2: new Float32Array(4) })).toThrow(/length 3 for db2/);
    try {
      native.feedforwardBackward({ ...bwd, offset: 0.5 });
      expect.unreachable();
    } catch (e) {
      expect((e as { code?: string }).code).toBe('ERR_NF_INVALID_ARG');
      expect((e as Error).message).toMatch(/feedforwardBackward: .*for offset/);
    }
  });
});
