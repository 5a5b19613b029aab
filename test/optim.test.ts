import { afterAll, describe, expect, it } from 'vitest';

import { native } from '../lib/native/addon';
import { f32, f64, isas, randn32, relErr, rng, withIsa, ErrorLog } from './helpers';

const log = new ErrorLog(1e-5);
afterAll(() => log.report('optimizer updates and reductions, largest relative error'));

const sizes = [1, 7, 1000, 70_001];  // 70 001: several threads' worth, and a tail in every ISA

type AdamCase = { lr?: number; beta1?: number; beta2?: number; eps?: number; weightDecay?: number; init: number };
const adamCases: AdamCase[] = [
  { init: 1 },  // torch's defaults
  { lr: 3e-3, beta1: 0.8, beta2: 0.99, eps: 1e-6, weightDecay: 0.1, init: 1 },
  { beta1: 0, weightDecay: 0, init: 0 },  // lerp weight 1 (torch's second lerp formula); param = Σ updates
  { lr: 1e-2, beta1: 0.5, init: 0.1 },  // lerp weight exactly 0.5: also the second formula
];

type SgdCase = { lr?: number; momentum?: number; dampening?: number; weightDecay?: number; nesterov?: boolean };
const sgdCases: SgdCase[] = [
  { lr: 0.1 },
  { lr: 0.05, momentum: 0.9 },
  { lr: 0.05, momentum: 0.9, dampening: 0.1, weightDecay: 1e-2 },
  { lr: 0.02, momentum: 0.95, weightDecay: 5e-4, nesterov: true },
];

/** The optimizer's buffers in both precisions: float64 for the reference, float32 for the kernel. */
function buffers(names: string[], n: number, init: Record<string, Float64Array>) {
  const ref: Record<string, Float64Array> = {}, fast: Record<string, Float32Array> = {};
  for (const k of names) {
    ref[k] = init[k] ? f64(init[k]) : new Float64Array(n);
    fast[k] = f32(ref[k]);
  }
  return { ref, fast };
}

describe.each(isas)('optimizers (%s)', (isa) => {
  describe.each(adamCases)('adamwStep lr=$lr beta1=$beta1 beta2=$beta2 wd=$weightDecay', (c) => {
    it.each(sizes)('10 steps, n=%i', (n) => {
      const r = rng(n * 7 + (c.beta1 ?? 9) * 100);
      const { ref, fast } = buffers(['param', 'expAvg', 'expAvgSq'], n, { param: randn32(n, r, c.init) });
      withIsa(isa, () => {
        for (let step = 1; step <= 10; step++) {
          const grad = randn32(n, r, 0.1 * step);
          native.adamwStep({ ...c, n, step, param: ref.param, grad, expAvg: ref.expAvg, expAvgSq: ref.expAvgSq });
          native.adamwStep({ ...c, n, step, param: fast.param, grad: f32(grad), expAvg: fast.expAvg,
            expAvgSq: fast.expAvgSq });
          for (const k of ['param', 'expAvg', 'expAvgSq'])
            expect(log.add(`${isa} adamwStep ${k}`, relErr(fast[k], ref[k]))).toBeLessThan(1e-5);
        }
      });
    });
  });

  describe.each(sgdCases)('sgdStep lr=$lr momentum=$momentum dampening=$dampening nesterov=$nesterov', (c) => {
    it.each(sizes)('first step and 4 more, n=%i', (n) => {
      const r = rng(n * 3 + (c.momentum ?? 0) * 1000);
      const { ref, fast } = buffers(['param', 'momentumBuf'], n, { param: randn32(n, r) });
      withIsa(isa, () => {
        for (let step = 1; step <= 5; step++) {
          const grad = randn32(n, r);
          native.sgdStep({ ...c, n, step, param: ref.param, grad, momentumBuf: ref.momentumBuf });
          native.sgdStep({ ...c, n, step, param: fast.param, grad: f32(grad), momentumBuf: fast.momentumBuf });
          expect(log.add(`${isa} sgdStep param`, relErr(fast.param, ref.param))).toBeLessThan(1e-5);
          if (c.momentum)
            expect(log.add(`${isa} sgdStep momentumBuf`, relErr(fast.momentumBuf, ref.momentumBuf))).toBeLessThan(1e-5);
          else expect(fast.momentumBuf.every((v) => v === 0)).toBe(true);  // untouched without momentum
        }
      });
    });
  });

  it.each([0, ...sizes, 100_003])('sumSquares, scale and clipGradNorm, n=%i', (n) => {
    const r = rng(n + 5);
    const x = randn32(n, r);
    const refOut = new Float64Array(1);
    native.sumSquares({ n, out: refOut, x });
    withIsa(isa, () => {
      const out = new Float32Array(1);
      native.sumSquares({ n, out, x: f32(x) });
      expect(log.add(`${isa} sumSquares`, relErr(out, refOut))).toBeLessThan(1e-5);
      const xs = f32(x), xr = f64(x);
      native.scale({ n, x: xs, s: -0.37 });
      native.scale({ n, x: xr, s: -0.37 });
      expect(log.add(`${isa} scale`, relErr(xs, xr))).toBeLessThan(1e-5);
      // Clipping above the threshold (the norm is about sqrt(n)) scales; below it leaves g untouched.
      for (const maxNorm of [0.5 * Math.sqrt(n), 2 * Math.sqrt(n) + 1]) {
        const g = f32(x), gr = f64(x), total = new Float32Array(1), totalRef = new Float64Array(1);
        native.clipGradNorm({ n, grad: g, maxNorm, totalNorm: total });
        native.clipGradNorm({ n, grad: gr, maxNorm, totalNorm: totalRef });
        expect(log.add(`${isa} clipGradNorm total`, relErr(total, totalRef))).toBeLessThan(1e-5);
        expect(log.add(`${isa} clipGradNorm grad`, relErr(g, gr))).toBeLessThan(1e-5);
        if (maxNorm > totalRef[0]) expect(g).toEqual(f32(x));
        else if (n > 0) expect(Math.sqrt(g.reduce((s, v) => s + v * v, 0))).toBeCloseTo(maxNorm, 3);
      }
    });
  });

  it('clipGradNorm with a NaN gradient turns every gradient NaN, as torch', () => {
    withIsa(isa, () => {
      const g = Float32Array.of(1, NaN, 2), total = new Float32Array(1);
      native.clipGradNorm({ n: 3, grad: g, maxNorm: 1, totalNorm: total });
      expect(total[0]).toBeNaN();
      expect(g.every(Number.isNaN)).toBe(true);
    });
  });

  it('results do not depend on the thread count', () => {
    withIsa(isa, () => {
      const x = f32(randn32(300_001, rng(1)));
      const sums = [1, 2].map((threads) => {
        native.setNumThreads(threads);
        const out = new Float32Array(1);
        native.sumSquares({ n: x.length, out, x });
        return out[0];
      });
      native.setNumThreads(0);
      expect(sums[0]).toBe(sums[1]);
    });
  });
});

describe('optimizer reference', () => {
  // Verified by hand from torch's formulas (lr 1e-3, betas (0.9, 0.999), eps 1e-8, wd 1e-2),
  // param 1, grad 0.5 at steps 1 and 2:
  //   step 1: param = 1·(1 − 1e-5) = 0.99999; m = 0.1·0.5 = 0.05; v = 0.001·0.25 = 2.5e-4;
  //     bc1 = 0.1, bc2 = 0.001; denom = sqrt(2.5e-4)/sqrt(0.001) + 1e-8 = 0.5 + 1e-8;
  //     param −= (1e-3/0.1)·0.05/(0.5 + 1e-8) = 0.00099999998 → 0.99899000002.
  //   step 2: param·(1 − 1e-5) = 0.99898001012; m = 0.05 + 0.1·(0.5 − 0.05) = 0.095;
  //     v = 0.999·2.5e-4 + 0.001·0.25 = 4.9975e-4; bc1 = 0.19, bc2 = 0.001999; sqrt(v/bc2) = 0.5;
  //     param −= (1e-3/0.19)·0.095/(0.5 + 1e-8) = 0.00099999998 → 0.99798001014.
  //   (With a constant gradient every step moves by lr, less the eps term, after the decay.)
  // SGD, lr 0.1, momentum 0.9, wd 0.01, param 1, grad 0.5:
  //   step 1: d = 0.5 + 0.01 = 0.51, buf = 0.51, param = 1 − 0.051 = 0.949;
  //   step 2: d = 0.5 + 0.00949 = 0.50949, buf = 0.9·0.51 + 0.50949 = 0.96849, param = 0.852151.
  //   Nesterov, step 1: buf = 0.51, d = 0.51 + 0.9·0.51 = 0.969, param = 0.9031.
  // clip_grad_norm_ of [3, 4] with max_norm 1: total 5, coef 1/(5 + 1e-6): [0.59999988, 0.79999984].
  const precisions = [[(a: number[]) => Float64Array.from(a), 1e-11], [(a: number[]) => Float32Array.from(a), 3e-7]] as const;

  it.each(precisions)('reproduces hand-computed values (%#: 0 float64, 1 float32)', (mk, tol) => {
    const param = mk([1]), expAvg = mk([0]), expAvgSq = mk([0]), grad = mk([0.5]);
    native.adamwStep({ n: 1, step: 1, param, grad, expAvg, expAvgSq });
    expect(Math.abs(param[0] - 0.99899000002)).toBeLessThan(tol);
    native.adamwStep({ n: 1, step: 2, param, grad, expAvg, expAvgSq });
    expect(Math.abs(param[0] - 0.99798001014)).toBeLessThan(tol);
    expect(Math.abs(expAvg[0] - 0.095)).toBeLessThan(tol);
    expect(Math.abs(expAvgSq[0] - 4.9975e-4)).toBeLessThan(tol);

    const p = mk([1]), buf = mk([123]);
    const sgd = { n: 1, lr: 0.1, momentum: 0.9, weightDecay: 0.01, param: p, grad, momentumBuf: buf };
    native.sgdStep({ ...sgd, step: 1 });
    expect(Math.abs(p[0] - 0.949)).toBeLessThan(tol);
    expect(Math.abs(buf[0] - 0.51)).toBeLessThan(tol);
    native.sgdStep({ ...sgd, step: 2 });
    expect(Math.abs(p[0] - 0.852151)).toBeLessThan(tol);
    expect(Math.abs(buf[0] - 0.96849)).toBeLessThan(tol);
    const pn = mk([1]);
    native.sgdStep({ ...sgd, param: pn, nesterov: true, step: 1 });
    expect(Math.abs(pn[0] - 0.9031)).toBeLessThan(tol);

    const g = mk([3, 4]), total = mk([0]);
    native.clipGradNorm({ n: 2, grad: g, maxNorm: 1, totalNorm: total });
    expect(total[0]).toBe(5);
    expect(Math.abs(g[0] - 0.59999988)).toBeLessThan(tol);
    expect(Math.abs(g[1] - 0.79999984)).toBeLessThan(tol);
    const clipped = [...g];
    native.clipGradNorm({ n: 2, grad: g, maxNorm: 10, totalNorm: total });  // below the threshold: untouched
    expect([...g]).toEqual(clipped);
    expect(Math.abs(total[0] - 5 / (5 + 1e-6))).toBeLessThan(tol);
  });

  it('rejects bad arguments with errors naming them', () => {
    const n = 4, fl = () => new Float32Array(n);
    const adam = { n, step: 1, param: fl(), grad: fl(), expAvg: fl(), expAvgSq: fl() };
    expect(() => native.adamwStep({ ...adam, expAvg: new Float32Array(3) })).toThrow(/adamwStep: .*length 4 for expAvg/);
    expect(() => native.adamwStep({ ...adam, grad: new Float64Array(n) })).toThrow(/Float32Array of length 4 for grad/);
    expect(() => native.adamwStep({ ...adam, step: 0 })).toThrow(/for step/);
    expect(() => native.adamwStep({ ...adam, step: undefined as unknown as number })).toThrow(/for step/);
    expect(() => native.adamwStep({ ...adam, beta1: 1 })).toThrow(/for beta1/);
    expect(() => native.adamwStep({ ...adam, beta2: -0.1 })).toThrow(/for beta2/);
    expect(() => native.adamwStep({ ...adam, lr: NaN })).toThrow(/for lr/);
    expect(() => native.adamwStep({ ...adam, weightDecay: -1 })).toThrow(/for weightDecay/);
    expect(() => native.adamwStep({ ...adam, eps: -1 })).toThrow(/for eps/);
    const sgd = { n, step: 1, param: fl(), grad: fl() };
    expect(() => native.sgdStep({ ...sgd, momentum: 0.9 })).toThrow(/sgdStep: .*length 4 for momentumBuf/);
    expect(() => native.sgdStep({ ...sgd, nesterov: true, momentum: 0.9, momentumBuf: fl(), dampening: 0.1 }))
      .toThrow(/nesterov/);
    expect(() => native.sgdStep({ ...sgd, nesterov: true })).toThrow(/nesterov/);
    expect(() => native.sgdStep({ ...sgd, momentum: -1 })).toThrow(/for momentum/);
    expect(() => native.sgdStep({ ...sgd, n: -1 })).toThrow(/for n/);
    expect(() => native.sumSquares({ n, out: new Float32Array(2), x: fl() })).toThrow(/sumSquares: .*length 1 for out/);
    expect(() => native.scale({ n, x: fl() } as unknown as { n: number; x: Float32Array; s: number })).toThrow(/for s/);
    expect(() => native.scale({ n, x: new Int32Array(n) as unknown as Float32Array, s: 2 })).toThrow(/for x/);
    expect(() => native.clipGradNorm({ n, grad: fl(), maxNorm: -1, totalNorm: new Float32Array(1) })).toThrow(/for maxNorm/);
    expect(() => native.clipGradNorm({ n, grad: fl(), totalNorm: new Float32Array(1) } as unknown as
      { n: number; grad: Float32Array; maxNorm: number; totalNorm: Float32Array })).toThrow(/for maxNorm/);
    expect(() => native.clipGradNorm({ n, grad: fl(), maxNorm: 1, totalNorm: new Float64Array(1) })).toThrow(/for totalNorm/);
    // @ts-expect-error: deliberately wrong call
    expect(() => native.adamwStep(null)).toThrow(/adamwStep: expected one options object/);
  });
});
