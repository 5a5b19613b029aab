import { afterAll, describe, expect, it } from 'vitest';

import { native } from '../lib/native/addon';
import { ErrorLog, f32, finiteDiffErr, isas, randn32, relErr, rng, withIsa } from './helpers';

const fwdLog = new ErrorLog(1e-5), bwdLog = new ErrorLog(1e-4);
afterAll(() => {
  fwdLog.report('loss values, largest relative error');
  bwdLog.report('loss gradients, largest relative error');
});

/** n targets in [0, V), with about `ignoredFrac` of them set to ignoreIndex. */
function targetsFor(n: number, V: number, r: () => number, ignoredFrac = 0, ignoreIndex = -100): Int32Array {
  return Int32Array.from({ length: n }, () => (r() < ignoredFrac ? ignoreIndex : Math.floor(r() * V)));
}

/** The `code` of the error `fn` throws (undefined when it does not throw). */
function errorCode(fn: () => void): string | undefined {
  try {
    fn();
  } catch (e) {
    return (e as { code?: string }).code;
  }
  return undefined;
}

type CeCase = { N: number; V: number; eps: number; ignored: number; ignoreIndex?: number; gradScale?: number;
  scale?: number };
const ceCases: CeCase[] = [
  { N: 1, V: 24, eps: 0, ignored: 0 },
  { N: 7, V: 72, eps: 0.1, ignored: 0.3 },
  { N: 65, V: 96, eps: 0, ignored: 0.2, gradScale: 0.5 },
  { N: 197, V: 1000, eps: 0.1, ignored: 0.1 },
  { N: 5 * 197, V: 10, eps: 0.05, ignored: 0 },  // a classifier's batch: many narrow rows
  { N: 9, V: 4099, eps: 0.2, ignored: 0.2, gradScale: 3 },  // rows wider than the 1024-element blocks
  { N: 40, V: 40, eps: 0.1, ignored: 0.25, ignoreIndex: 0 },  // an in-range ignore_index (a pad token)
  { N: 3, V: 1, eps: 0.3, ignored: 0 },
  { N: 33, V: 50, eps: 0.1, ignored: 0.1, scale: 1e4 },  // logits of ±1e4
];

function ceRef(c: CeCase, logits: Float64Array, targets: Int32Array) {
  const loss = new Float64Array(1), dlogits = new Float64Array(c.N * c.V);
  native.crossEntropy({ N: c.N, V: c.V, labelSmoothing: c.eps, ignoreIndex: c.ignoreIndex, gradScale: c.gradScale,
    loss, dlogits, logits, targets });
  return { loss, dlogits };
}

type MseCase = { rows: number; cols: number; masked: boolean; gradScale?: number };
const mseCases: MseCase[] = [
  { rows: 1, cols: 24, masked: false },
  { rows: 7, cols: 72, masked: true },
  { rows: 65 * 5, cols: 48, masked: true, gradScale: 0.25 },  // MAE: 5 images × 65 patches of 4·4·3
  { rows: 197, cols: 1500, masked: false },
  { rows: 3, cols: 1, masked: true },
];

function mseRef(c: MseCase, pred: Float64Array, target: Float64Array, mask: Uint8Array | null) {
  const loss = new Float64Array(1), dpred = new Float64Array(c.rows * c.cols);
  native.mse({ rows: c.rows, cols: c.cols, gradScale: c.gradScale, loss, dpred, pred, target, mask });
  return { loss, dpred };
}

describe.each(isas)('losses (%s)', (isa) => {
  it.each(ceCases)('crossEntropy N=$N V=$V eps=$eps ignored=$ignored scale=$scale', (c) => {
    const r = rng(c.N * 131 + c.V);
    const logits = randn32(c.N * c.V, r, c.scale ?? 2);
    const targets = targetsFor(c.N, c.V, r, c.ignored, c.ignoreIndex);
    if (targets.every((t) => t === (c.ignoreIndex ?? -100))) targets[0] = c.V - 1;
    const ref = ceRef(c, logits, targets);
    withIsa(isa, () => {
      const loss = new Float32Array(1), dlogits = new Float32Array(c.N * c.V).fill(7);
      native.crossEntropy({ N: c.N, V: c.V, labelSmoothing: c.eps, ignoreIndex: c.ignoreIndex, gradScale: c.gradScale,
        loss, dlogits, logits: f32(logits), targets });
      expect(Number.isFinite(loss[0]) && dlogits.every(Number.isFinite)).toBe(true);
      expect(fwdLog.add(`${isa} crossEntropy loss`, relErr(loss, ref.loss))).toBeLessThan(1e-5);
      expect(bwdLog.add(`${isa} crossEntropy dlogits`, relErr(dlogits, ref.dlogits))).toBeLessThan(1e-4);
      // Without dlogits only the loss is computed, and it is the same.
      const loss2 = new Float32Array(1);
      native.crossEntropy({ N: c.N, V: c.V, labelSmoothing: c.eps, ignoreIndex: c.ignoreIndex, loss: loss2,
        logits: f32(logits), targets });
      expect(loss2[0]).toBe(loss[0]);
    });
  });

  it('crossEntropy with every row ignored: NaN loss (as PyTorch) and zero gradient', () => {
    withIsa(isa, () => {
      const loss = new Float32Array(1), dlogits = new Float32Array(12).fill(7);
      native.crossEntropy({ N: 3, V: 4, labelSmoothing: 0.1, loss, dlogits, logits: new Float32Array(12).fill(1),
        targets: new Int32Array(3).fill(-100) });
      expect(loss[0]).toBeNaN();
      expect(dlogits.every((v) => v === 0)).toBe(true);
      native.crossEntropy({ N: 0, V: 4, loss, logits: new Float32Array(0), targets: new Int32Array(0) });
      expect(loss[0]).toBeNaN();
    });
  });

  it('crossEntropy does not depend on the thread count', () => {
    withIsa(isa, () => {
      const r = rng(5), N = 700, V = 50;
      const logits = f32(randn32(N * V, r)), targets = targetsFor(N, V, r, 0.1);
      const losses = [1, 2].map((threads) => {
        native.setNumThreads(threads);
        const loss = new Float32Array(1);
        native.crossEntropy({ N, V, loss, logits, targets });
        return loss[0];
      });
      native.setNumThreads(0);
      expect(losses[0]).toBe(losses[1]);
    });
  });

  it.each(mseCases)('mse rows=$rows cols=$cols masked=$masked', (c) => {
    const r = rng(c.rows * 17 + c.cols);
    const n = c.rows * c.cols;
    const pred = randn32(n, r), target = randn32(n, r);
    const mask = c.masked ? Uint8Array.from({ length: c.rows }, (_, i) => (i === 0 || r() < 0.6 ? 1 : 0)) : null;
    const ref = mseRef(c, pred, target, mask);
    withIsa(isa, () => {
      const loss = new Float32Array(1), dpred = new Float32Array(n).fill(7);
      native.mse({ rows: c.rows, cols: c.cols, gradScale: c.gradScale, loss, dpred, pred: f32(pred),
        target: f32(target), mask });
      expect(fwdLog.add(`${isa} mse loss`, relErr(loss, ref.loss))).toBeLessThan(1e-5);
      expect(bwdLog.add(`${isa} mse dpred`, relErr(dpred, ref.dpred))).toBeLessThan(1e-4);
    });
  });

  it('mse with no row selected: NaN loss (the mean of nothing) and zero gradient', () => {
    withIsa(isa, () => {
      const loss = new Float32Array(1), dpred = new Float32Array(6).fill(7);
      native.mse({ rows: 2, cols: 3, loss, dpred, pred: new Float32Array(6).fill(1), target: new Float32Array(6),
        mask: new Uint8Array(2) });
      expect(loss[0]).toBeNaN();
      expect(dpred.every((v) => v === 0)).toBe(true);
    });
  });
});

describe('loss reference', () => {
  // Verified by hand from PyTorch's formulas: logits [1, 2, 3], target 2:
  //   lse = 3 + log(e⁻² + e⁻¹ + 1) = 3.4076059644, so −log p₂ = 0.4076059644 (F.cross_entropy's 0.4076);
  //   with ε = 0.1: 0.9·0.4076059644 + 0.1·(lse − mean(x) = 1.4076059644) = 0.5076059644;
  //   p = [0.0900305732, 0.2447284711, 0.6652409558], so dlogits = p − ε/3 − 0.9·onehot(2)
  //     = [0.0566972399, 0.2113951378, −0.2680923775].
  // Uniform logits give log V whatever ε: V = 4 → 1.3862943611.
  // MSE of pred [[1, 2], [3, 4]] against zeros, mask [0, 1]: (9 + 16) / 2 = 12.5, dpred = [[0, 0], [3, 4]].
  it('reproduces hand-computed values', () => {
    const precisions = [[(a: number[]) => Float64Array.from(a), 1e-9], [(a: number[]) => Float32Array.from(a), 1e-6]] as const;
    for (const [mk, tol] of precisions) {
      const loss = mk([0]), dlogits = mk([0, 0, 0]);
      native.crossEntropy({ N: 1, V: 3, loss, dlogits, logits: mk([1, 2, 3]), targets: Int32Array.of(2) });
      expect(Math.abs(loss[0] - 0.4076059644)).toBeLessThan(tol);
      native.crossEntropy({ N: 1, V: 3, labelSmoothing: 0.1, loss, dlogits, logits: mk([1, 2, 3]),
        targets: Int32Array.of(2) });
      expect(Math.abs(loss[0] - 0.5076059644)).toBeLessThan(tol);
      [0.0566972399, 0.2113951378, -0.2680923775].forEach((v, i) => expect(Math.abs(dlogits[i] - v)).toBeLessThan(tol));
      native.crossEntropy({ N: 2, V: 4, labelSmoothing: 0.3, loss, logits: mk([0, 0, 0, 0, 5, 5, 5, 5]),
        targets: Int32Array.of(1, 3) });
      expect(Math.abs(loss[0] - 1.3862943611)).toBeLessThan(tol);
      const dpred = mk([9, 9, 9, 9]);
      native.mse({ rows: 2, cols: 2, loss, dpred, pred: mk([1, 2, 3, 4]), target: mk([0, 0, 0, 0]),
        mask: Uint8Array.of(0, 1) });
      expect(loss[0]).toBe(12.5);
      expect([...dpred]).toEqual([0, 0, 3, 4]);
    }
  });

  it('crossEntropy matches finite differences of its own loss (label smoothing, ignored rows)', () => {
    const c: CeCase = { N: 6, V: 9, eps: 0.15, ignored: 0, gradScale: 1 };
    const r = rng(11);
    const logits = randn32(c.N * c.V, r, 3);
    const targets = targetsFor(c.N, c.V, r);
    targets[1] = targets[4] = -100;
    const { dlogits } = ceRef(c, logits, targets);
    expect(dlogits.slice(c.V, 2 * c.V).every((v) => v === 0)).toBe(true);
    expect(finiteDiffErr(() => ceRef(c, logits, targets).loss[0], logits, dlogits, r, c.N * c.V)).toBeLessThan(1e-6);
  });

  it('mse matches finite differences of its own loss (masked rows)', () => {
    const c: MseCase = { rows: 5, cols: 7, masked: true, gradScale: 1 };
    const r = rng(12);
    const pred = randn32(35, r), target = randn32(35, r), mask = Uint8Array.of(1, 0, 1, 1, 0);
    const { dpred } = mseRef(c, pred, target, mask);
    expect(finiteDiffErr(() => mseRef(c, pred, target, mask).loss[0], pred, dpred, r, 35)).toBeLessThan(1e-6);
  });

  it('rejects targets outside [0, V) that are not ignoreIndex, naming the row', () => {
    const logits = new Float32Array(12);
    for (const f of [f32, (a: ArrayLike<number>) => Float64Array.from(a)]) {
      const a = { N: 3, V: 4, loss: f([0]), logits: f(logits) };
      expect(() => native.crossEntropy({ ...a, targets: Int32Array.of(0, 3, 4) })).toThrow(/target 4 at row 2 is outside \[0, 4\)/);
      expect(() => native.crossEntropy({ ...a, targets: Int32Array.of(-1, 0, 0) })).toThrow(/target -1 at row 0/);
      expect(() => native.crossEntropy({ ...a, ignoreIndex: 7, targets: Int32Array.of(0, -100, 7) })).toThrow(/at row 1/);
      expect(() => native.crossEntropy({ ...a, ignoreIndex: 7, targets: Int32Array.of(0, 7, 7) })).not.toThrow();
    }
    expect(errorCode(() => native.crossEntropy({ N: 1, V: 4, loss: new Float32Array(1), logits: new Float32Array(4),
      targets: Int32Array.of(9) }))).toBe('ERR_NF_INVALID_ARG');
  });

  it('rejects bad arguments with errors naming them', () => {
    const ce = { N: 2, V: 3, loss: new Float32Array(1), logits: new Float32Array(6), targets: new Int32Array(2) };
    expect(() => native.crossEntropy({ ...ce, logits: new Float32Array(5) })).toThrow(/crossEntropy: .*length 6 for logits/);
    expect(() => native.crossEntropy({ ...ce, dlogits: new Float32Array(5) })).toThrow(/length 6 for dlogits/);
    expect(() => native.crossEntropy({ ...ce, loss: new Float32Array(2) })).toThrow(/length 1 for loss/);
    expect(() => native.crossEntropy({ ...ce, targets: new Float32Array(2) as unknown as Int32Array })).toThrow(/Int32Array of length 2 for targets/);
    expect(() => native.crossEntropy({ ...ce, loss: new Float64Array(1) })).toThrow(/Float32Array of length 1 for loss/);
    expect(() => native.crossEntropy({ ...ce, V: 0 })).toThrow(/for V/);
    expect(() => native.crossEntropy({ ...ce, N: -1 })).toThrow(/for N/);
    expect(() => native.crossEntropy({ ...ce, labelSmoothing: 1.5 })).toThrow(/for labelSmoothing/);
    expect(() => native.crossEntropy({ ...ce, ignoreIndex: 0.5 })).toThrow(/for ignoreIndex/);
    expect(() => native.crossEntropy({ ...ce, gradScale: Infinity })).toThrow(/for gradScale/);
    const m = { rows: 2, cols: 3, loss: new Float32Array(1), pred: new Float32Array(6), target: new Float32Array(6) };
    expect(() => native.mse({ ...m, target: new Float32Array(7) })).toThrow(/mse: .*length 6 for target/);
    expect(() => native.mse({ ...m, mask: new Uint8Array(3) })).toThrow(/Uint8Array of length 2 for mask/);
    expect(() => native.mse({ ...m, mask: new Int32Array(2) as unknown as Uint8Array })).toThrow(/for mask/);
    expect(() => native.mse({ ...m, dpred: new Float64Array(6) })).toThrow(/Float32Array of length 6 for dpred/);
    expect(() => native.mse({ ...m, cols: 0 })).toThrow(/for cols/);
    // @ts-expect-error: deliberately wrong call
    expect(() => native.mse(null)).toThrow(/mse: expected one options object/);
    expect(errorCode(() => native.crossEntropy({ ...ce, logits: undefined as unknown as Float32Array })))
      .toBe('ERR_NF_INVALID_ARG');
  });
});
