import { afterAll, describe, expect, it } from 'vitest';

import { native } from '../lib/native/addon';
import type { FloatArray } from '../lib/native/ops.generated';
import { dot, ErrorLog, f32, finiteDiffErr, isas, randn32, relErr, rng, withIsa } from './helpers';

const fwdLog = new ErrorLog(1e-5), bwdLog = new ErrorLog(1e-4);
afterAll(() => {
  fwdLog.report('attention forward, largest relative error');
  bwdLog.report('attention backward, largest relative error');
});

type Case = {
  B: number; Tq: number; Tk?: number; D: number; H: number;
  cross?: boolean; causal?: boolean;
  padding?: boolean;    // random key padding, and every key of the last batch entry padded (B > 1)
  attn?: '2d' | '3d';   // random attention mask
  blockRows?: boolean;  // attnMask blocks every key of rows i % 5 == 2
  p?: number; weights?: boolean; noBias?: boolean;
};

type Inputs = {
  x: Float64Array; memory: Float64Array | null; Wqkv: Float64Array; bqkv: Float64Array | null;
  Wproj: Float64Array; bproj: Float64Array | null; dout: Float64Array;
  keyPaddingMask: Uint8Array | null; attnMask: Uint8Array | null;
};

const tk = (c: Case) => c.Tk ?? c.Tq;

function makeInputs(c: Case, seed: number): Inputs {
  const r = rng(seed), Tk = tk(c), D = c.D;
  let keyPaddingMask: Uint8Array | null = null, attnMask: Uint8Array | null = null;
  if (c.padding) {
    keyPaddingMask = Uint8Array.from({ length: c.B * Tk }, () => (r() < 0.25 ? 1 : 0));
    if (c.B > 1) keyPaddingMask.fill(1, (c.B - 1) * Tk);
  }
  if (c.attn || c.blockRows) {
    const batches = c.attn === '3d' ? c.B : 1;
    attnMask = Uint8Array.from({ length: batches * c.Tq * Tk }, () => (c.attn && r() < 0.2 ? 1 : 0));
    if (c.blockRows)
      for (let row = 0; row < batches * c.Tq; row++) if (row % c.Tq % 5 === 2) attnMask.fill(1, row * Tk, (row + 1) * Tk);
  }
  return {
    x: randn32(c.B * c.Tq * D, r), memory: c.cross ? randn32(c.B * Tk * D, r) : null,
    Wqkv: randn32(3 * D * D, r, 1 / Math.sqrt(D)), bqkv: c.noBias ? null : randn32(3 * D, r, 0.5),
    Wproj: randn32(D * D, r, 1 / Math.sqrt(D)), bproj: c.noBias ? null : randn32(D, r, 0.5),
    dout: randn32(c.B * c.Tq * D, r), keyPaddingMask, attnMask,
  };
}

const GRAD_INIT = 0.5;  // the float32 run's parameter gradients start here, to check they accumulate

/** Forward and backward of the layer, in float64 (the reference) or float32 (the fast kernels). */
function layer(c: Case, inp: Inputs, use64: boolean, extra: { seed?: number; offset?: number } = {}) {
  const A = (n: number): FloatArray => (use64 ? new Float64Array(n) : new Float32Array(n));
  const cv = (a: Float64Array | null) => (a === null ? null : use64 ? a : f32(a));
  const { B, Tq, D, H } = c, Tk = tk(c), nq = B * Tq * D, nk = B * Tk * D;
  const common = {
    B, Tq, Tk, D, H, memory: cv(inp.memory), causal: c.causal, keyPaddingMask: inp.keyPaddingMask,
    attnMask: inp.attnMask, dropoutP: c.p, seed: extra.seed ?? 1234, offset: extra.offset ?? 7,
  };
  const saved = c.cross ? { q: A(nq), kv: A(2 * nk), ctx: A(nq), lse: A(B * H * Tq) }
    : { qkv: A(3 * nq), ctx: A(nq), lse: A(B * H * Tq) };
  const out = A(nq), weights = c.weights ? A(B * H * Tq * Tk) : null;
  const x = cv(inp.x)!, qkvWeight = cv(inp.Wqkv)!, projWeight = cv(inp.Wproj)!;
  native.attentionForward({ ...common, ...saved, out, weights, x, qkvWeight, qkvBias: cv(inp.bqkv), projWeight,
    projBias: cv(inp.bproj) });
  const init = use64 ? 0 : GRAD_INIT;
  const grads = {
    dx: A(nq), dMemory: c.cross ? A(nk) : null,
    dQkvWeight: A(3 * D * D).fill(init), dQkvBias: c.noBias ? null : A(3 * D).fill(init),
    dProjWeight: A(D * D).fill(init), dProjBias: c.noBias ? null : A(D).fill(init),
  };
  native.attentionBackward({ ...common, ...saved, ...grads, dout: cv(inp.dout)!, x, qkvWeight, projWeight });
  return { out, weights, ...saved, ...grads };
}
type Result = ReturnType<typeof layer>;

/** Relative error of lse, whose -Infinity (fully blocked rows) must sit at the same places. */
function lseErr(got: FloatArray, ref: FloatArray): number {
  for (let i = 0; i < ref.length; i++) expect(got[i] === -Infinity).toBe(ref[i] === -Infinity);
  const fin = (a: FloatArray) => Array.from(a, (v) => (v === -Infinity ? 0 : v));
  return relErr(fin(got), fin(ref));
}

/** Every weights row sums to 1, or is all 0 exactly when its lse is -Infinity. */
function checkWeightRows(weights: FloatArray, lse: FloatArray, Tk: number) {
  for (let row = 0; row < lse.length; row++) {
    let s = 0;
    for (let j = 0; j < Tk; j++) s += weights[row * Tk + j];
    if (lse[row] === -Infinity) expect(s).toBe(0);
    else expect(Math.abs(s - 1)).toBeLessThan(1e-5);
  }
}

function compare(isa: string, c: Case, got: Result, ref: Result) {
  const f = (name: string, a: FloatArray, b: FloatArray) =>
    expect(fwdLog.add(`${isa} ${name}`, relErr(a, b)), name).toBeLessThan(1e-5);
  const g = (name: string, a: FloatArray, b: FloatArray, init = 0) =>
    expect(bwdLog.add(`${isa} ${name}`, relErr(a.map((v) => v - init), b)), name).toBeLessThan(1e-4);
  f('out', got.out, ref.out);
  f('ctx', got.ctx, ref.ctx);
  expect(fwdLog.add(`${isa} lse`, lseErr(got.lse, ref.lse))).toBeLessThan(1e-5);
  if (c.cross) {
    f('q', got.q!, ref.q!);
    f('kv', got.kv!, ref.kv!);
  } else {
    f('qkv', got.qkv!, ref.qkv!);
  }
  if (c.weights) {
    f('weights', got.weights!, ref.weights!);
    checkWeightRows(got.weights!, got.lse, tk(c));
  }
  g('dx', got.dx, ref.dx);
  if (c.cross) g('dMemory', got.dMemory!, ref.dMemory!);
  g('dQkvWeight', got.dQkvWeight, ref.dQkvWeight, GRAD_INIT);
  g('dProjWeight', got.dProjWeight, ref.dProjWeight, GRAD_INIT);
  if (!c.noBias) {
    g('dQkvBias', got.dQkvBias!, ref.dQkvBias!, GRAD_INIT);
    g('dProjBias', got.dProjBias!, ref.dProjBias!, GRAD_INIT);
  }
}

// Head widths 6 (D24/H4), 12 (D36/H3), 20 (D40/H2), 24 (D72/H3), 32 (D64/H2), 40 (D80/H2), 64
// (D128/H2): whole 8 x 8 blocks of a key tile's transpose and the rows and columns left over;
// T = 1, 7, 37, 65, 70, 81, 197 (key tiles of 80); batch 1 to 5.
const cases: Case[] = [
  { B: 1, Tq: 1, D: 24, H: 4 },
  { B: 5, Tq: 7, D: 72, H: 3, causal: true },
  { B: 1, Tq: 65, D: 80, H: 2, padding: true },
  { B: 5, Tq: 7, D: 72, H: 3, attn: '3d' },
  { B: 5, Tq: 7, Tk: 65, D: 24, H: 4, cross: true, padding: true, attn: '3d' },
  { B: 1, Tq: 197, D: 80, H: 2, causal: true, p: 0.1 },
  { B: 2, Tq: 65, Tk: 7, D: 72, H: 3, cross: true, attn: '2d', blockRows: true, p: 0.2, weights: true },
  { B: 5, Tq: 197, D: 24, H: 4, causal: true, padding: true, attn: '3d', p: 0.15, weights: true, noBias: true },
  { B: 2, Tq: 65, Tk: 197, D: 128, H: 2, cross: true, causal: true, weights: true },
  { B: 5, Tq: 1, Tk: 7, D: 40, H: 1, cross: true, attn: '2d', p: 0.3 },
  { B: 5, Tq: 197, Tk: 3, D: 72, H: 3, cross: true, padding: true, weights: true },
  { B: 1, Tq: 7, D: 24, H: 4, causal: true, blockRows: true, padding: true, p: 0.5 },
  { B: 2, Tq: 37, D: 36, H: 3, padding: true },
  { B: 3, Tq: 70, D: 40, H: 2, causal: true, weights: true },
  { B: 2, Tq: 65, Tk: 81, D: 64, H: 2, cross: true, attn: '2d' },
];
const label = (c: Case) =>
  `${c.cross ? 'cross' : 'self'} B=${c.B} Tq=${c.Tq} Tk=${tk(c)} D=${c.D} H=${c.H}` +
  `${c.causal ? ' causal' : ''}${c.padding ? ' padding' : ''}${c.attn ? ` attn${c.attn}` : ''}` +
  `${c.blockRows ? ' blockRows' : ''}${c.p ? ` p=${c.p}` : ''}${c.weights ? ' weights' : ''}`;

describe.each(isas)('attention (%s)', (isa) => {
  it.each(cases.map((c) => [label(c), c] as const))('%s', (_, c) => {
    const inp = makeInputs(c, c.B * 1000 + c.Tq * 31 + c.D);
    const ref = layer(c, inp, true);
    compare(isa, c, withIsa(isa, () => layer(c, inp, false)), ref);
  });

  it('fully blocked rows output exactly 0 and pass no gradient', () => {
    // Cross-attention, so x row i reaches the loss only through query i. Batch 1's keys are all
    // padding; rows 3 and 7 are blocked by the attention mask everywhere.
    const c: Case = { B: 3, Tq: 9, Tk: 11, D: 24, H: 2, cross: true, p: 0.1, weights: true };
    const inp = makeInputs(c, 5);
    inp.keyPaddingMask = new Uint8Array(c.B * 11).fill(1, 11, 22);
    inp.attnMask = new Uint8Array(9 * 11).fill(1, 3 * 11, 4 * 11).fill(1, 7 * 11, 8 * 11);
    const ref = layer(c, inp, true);
    const got = withIsa(isa, () => layer(c, inp, false));
    compare(isa, c, got, ref);
    const blocked = (b: number, i: number) => b === 1 || i === 3 || i === 7;
    for (const res of [got, ref]) {
      for (let b = 0; b < c.B; b++)
        for (let i = 0; i < c.Tq; i++) {
          const row = (b * c.Tq + i) * c.D;
          const ctx = Array.from(res.ctx.subarray(row, row + c.D)), dx = Array.from(res.dx.subarray(row, row + c.D));
          const out = Array.from(res.out.subarray(row, row + c.D));
          if (blocked(b, i)) {
            expect(ctx.every((v) => v === 0)).toBe(true);
            expect(dx.every((v) => v === 0)).toBe(true);
            expect(out).toEqual(Array.from(inp.bproj!));  // proj of a zero ctx row: its bias, exactly
          } else {
            expect(ctx.some((v) => v !== 0)).toBe(true);
          }
          for (let h = 0; h < c.H; h++) expect(res.lse[(b * c.H + h) * c.Tq + i] === -Infinity).toBe(blocked(b, i));
        }
      // Batch 1's memory is never attended to: no gradient.
      expect(Array.from(res.dMemory!.subarray(11 * c.D, 22 * c.D)).every((v) => v === 0)).toBe(true);
      checkWeightRows(res.weights!, res.lse, 11);
      for (const a of Object.values(res)) if (a) expect(a.every((v: number) => Number.isFinite(v) || v === -Infinity)).toBe(true);
    }
  });

  it('dropout p = 0 is no dropout, whatever the seed', () => {
    const c: Case = { B: 2, Tq: 33, D: 24, H: 3, causal: true, padding: true };
    const inp = makeInputs(c, 11);
    withIsa(isa, () => {
      const plain = layer(c, inp, false);
      const zero = layer({ ...c, p: 0 }, inp, false, { seed: 99, offset: 5 });
      for (const k of ['out', 'lse', 'dx', 'dQkvWeight'] as const) expect(zero[k]).toEqual(plain[k]);
    });
  });

  it('dropout keeps 1 - p of the weights, the same elements as the reference', () => {
    // Q = K = 0 makes every weight 1/Tk; memory row j = e_j and V = identity make ctx[b, i, j] =
    // Z[b, 0, i, j] / Tk, and proj = identity passes it to out: out reveals each keep decision.
    const B = 4, Tq = 128, Tk = 64, D = 64, p = 0.3;
    const c: Case = { B, Tq, Tk, D, H: 1, cross: true, p, noBias: true };
    const eye = (n: number) => Float64Array.from({ length: n * n }, (_, k) => (k % (n + 1) === 0 ? 1 : 0));
    const Wqkv = new Float64Array(3 * D * D);
    Wqkv.set(eye(D), 2 * D * D);
    const memory = new Float64Array(B * Tk * D);
    for (let b = 0; b < B; b++) memory.set(eye(D), b * Tk * D);
    const inp: Inputs = { x: randn32(B * Tq * D, rng(3)), memory, Wqkv, bqkv: null, Wproj: eye(D), bproj: null,
      dout: new Float64Array(B * Tq * D), keyPaddingMask: null, attnMask: null };
    const ref = layer(c, inp, true);
    const got = withIsa(isa, () => layer(c, inp, false));
    const keptValue = 1 / ((1 - p) * Tk);
    let kept = 0, disagree = 0, worst = 0;
    for (let e = 0; e < got.out.length; e++) {
      const k = got.out[e] !== 0;
      if (k !== (ref.out[e] !== 0)) disagree++;
      if (k) {
        worst = Math.max(worst, Math.abs(got.out[e] - keptValue) / keptValue);
        kept++;
      }
    }
    expect(disagree).toBe(0);
    expect(worst).toBeLessThan(1e-6);
    const n = got.out.length, sigma = Math.sqrt(p * (1 - p) / n);
    expect(Math.abs(kept / n - (1 - p))).toBeLessThan(4 * sigma);
    // A different offset draws a different mask.
    const other = withIsa(isa, () => layer(c, inp, false, { offset: 8 }));
    let same = 0;
    for (let e = 0; e < n; e++) if ((other.out[e] !== 0) === (got.out[e] !== 0)) same++;
    expect(same / n).toBeLessThan(0.7);
  });
});

describe('attention reference', () => {
  // Finite differences of the float64 forward, dropout on: the backward sees the forward's masks.
  const fdCases: Case[] = [
    { B: 2, Tq: 6, D: 12, H: 2, causal: true, padding: true, blockRows: true, p: 0.3 },
    { B: 2, Tq: 5, Tk: 7, D: 12, H: 3, cross: true, attn: '3d', p: 0.3 },
  ];
  it.each(fdCases.map((c) => [label(c), c] as const))('matches finite differences: %s', (_, c) => {
    const inp = makeInputs(c, 77);
    const r = rng(8);
    const loss = () => dot(layer(c, inp, true).out, inp.dout);
    const g = layer(c, inp, true);
    expect(finiteDiffErr(loss, inp.x, g.dx, r)).toBeLessThan(1e-6);
    if (c.cross) expect(finiteDiffErr(loss, inp.memory!, g.dMemory!, r)).toBeLessThan(1e-6);
    expect(finiteDiffErr(loss, inp.Wqkv, g.dQkvWeight, r, 48)).toBeLessThan(1e-6);
    expect(finiteDiffErr(loss, inp.bqkv!, g.dQkvBias!, r)).toBeLessThan(1e-6);
    expect(finiteDiffErr(loss, inp.Wproj, g.dProjWeight, r)).toBeLessThan(1e-6);
    expect(finiteDiffErr(loss, inp.bproj!, g.dProjBias!, r)).toBeLessThan(1e-6);
  });

  it('runs T = 1024 (flash tiles, no T x T buffer) and matches the reference', () => {
    const c: Case = { B: 1, Tq: 1024, D: 64, H: 2, causal: true, p: 0.1 };
    const inp = makeInputs(c, 1024);
    compare(native.isaInfo().active, c, layer(c, inp, false), layer(c, inp, true));
  });

  it('rejects bad arguments with errors naming them', () => {
    const B = 2, T = 3, D = 4, H = 2, n = B * T * D;
    const ok = { B, Tq: T, D, H, out: new Float32Array(n), qkv: new Float32Array(3 * n), ctx: new Float32Array(n),
      lse: new Float32Array(B * H * T), x: new Float32Array(n), qkvWeight: new Float32Array(3 * D * D),
      projWeight: new Float32Array(D * D) };
    const fwd = (o: object) => () => native.attentionForward({ ...ok, ...o });
    expect(fwd({ x: new Float32Array(n - 1) })).toThrow(/attentionForward: .*length 24 for x/);
    expect(fwd({ qkvWeight: new Float64Array(3 * D * D) })).toThrow(/Float32Array of length 48 for qkvWeight/);
    expect(fwd({ H: 3 })).toThrow(/D \(4\) must be divisible by H \(3\)/);
    expect(fwd({ H: 0 })).toThrow(/for H/);
    expect(fwd({ Tk: 5 })).toThrow(/Tk == Tq/);
    expect(fwd({ qkv: null })).toThrow(/for qkv/);
    expect(fwd({ memory: new Float32Array(n) })).toThrow(/for q /);
    expect(fwd({ keyPaddingMask: new Float32Array(B * T) })).toThrow(/Uint8Array of length 6 for keyPaddingMask/);
    expect(fwd({ attnMask: new Uint8Array(T * T + 1) })).toThrow(/for attnMask/);
    expect(fwd({ dropoutP: 1 })).toThrow(/dropoutP/);
    expect(fwd({ dropoutP: -0.1 })).toThrow(/dropoutP/);
    expect(fwd({ seed: 1.5 })).toThrow(/for seed/);
    expect(fwd({ weights: new Float32Array(5) })).toThrow(/for weights/);
    expect(fwd({ lse: new Float32Array(B * T) })).toThrow(/for lse/);
    expect(fwd({ attnMask: new Uint8Array(T * T) })).not.toThrow();
    expect(fwd({ attnMask: new Uint8Array(B * T * T) })).not.toThrow();
    // @ts-expect-error: deliberately wrong call
    expect(() => native.attentionForward(null)).toThrow(/expected one options object/);
    const bwd = { ...ok, dx: new Float32Array(n), dQkvWeight: new Float32Array(3 * D * D),
      dProjWeight: new Float32Array(D * D), dout: new Float32Array(n) };
    expect(() => native.attentionBackward({ ...bwd, dMemory: new Float32Array(n) })).toThrow(/dMemory is only for cross/);
    expect(() => native.attentionBackward({ ...bwd, dout: undefined as unknown as Float32Array })).toThrow(/for dout/);
    try {
      native.attentionBackward({ ...bwd, ctx: new Float32Array(1) });
    } catch (e) {
      expect((e as { code?: string }).code).toBe('ERR_NF_INVALID_ARG');
    }
  });
});
