/**
 * The multi-tensor AdamW (adamwMultiStep: native/ops/optim.h, native/cuda/optim.cu) and what the
 * optimizer does with it: on the CPU, the op equals adamwStep on each entry bit for bit (every ISA)
 * and its float64 twin, and its bf16 copies are the new masters rounded as castBf16 rounds; under
 * precision 'bf16' AdamW writes the weights' copies in its step (no recast before the next forward),
 * with the weights the arena update gives; its list fields are checked entry by entry. On the emulated CUDA backend: the
 * op equals adamwStep per tensor bit for bit, the bf16 copies it writes are the new masters rounded
 * to nearest even; AdamW steps each parameter group with one op (a few launches, not one per
 * parameter) and, under precision 'bf16', leaves the weights' bf16 copies fresh so no recast runs
 * before the next forward; a parameter written from JS is recast when read; graph replays equal eager
 * steps bit for bit with no recast between them.
 */
import { beforeAll, describe, expect, it } from 'vitest';

import { AdamW, cudaGraphStats, Tensor, trainStep, ViTClassifier, type Parameter } from '../lib';
import { cuda, type DeviceBuffer } from '../lib/core/device';
import { native } from '../lib/native/addon';
import { f32, isas, randn32, relErr, rng, withIsa } from './helpers';
import { cublasltStandIn, emulatorSkipReason, useEmulator } from './support/cuda_emu_build';

const SIZES = [1, 7, 4097, 0, 33, 70_001];
/** A typed array's own bytes (not the rest of its ArrayBuffer). */
const bytes = (a: ArrayBufferView) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);
const HYPER = { lr: 3e-3, beta1: 0.8, beta2: 0.99, eps: 1e-6, weightDecay: 0.05 };

/** Random param, grad and moment lists of SIZES (exp_avg_sq non-negative). */
function lists(seed: number) {
  const r = rng(seed);
  const make = (scale: number, abs = false) => SIZES.map((n) => Float64Array.from(randn32(n, r, scale), (v) => (abs ? Math.abs(v) : v)));
  return { param: make(1), grad: make(1), expAvg: make(0.1), expAvgSq: make(0.01, true) };
}

describe.each(isas)('adamwMultiStep on the CPU (%s)', (isa) => {
  it('equals adamwStep on each entry bit for bit, its float64 twin within 1e-5, and writes the copies', () => {
    const l = lists(1);
    const one = { param: l.param.map(f32), grad: l.grad.map(f32), expAvg: l.expAvg.map(f32), expAvgSq: l.expAvgSq.map(f32) };
    const many = { param: l.param.map(f32), grad: l.grad.map(f32), expAvg: l.expAvg.map(f32), expAvgSq: l.expAvgSq.map(f32) };
    const ref = { param: l.param.map((a) => a.slice()), grad: l.grad, expAvg: l.expAvg.map((a) => a.slice()), expAvgSq: l.expAvgSq.map((a) => a.slice()) };
    const copy = SIZES.map((n, i) => (i % 2 ? new Float32Array(n) : null));
    withIsa(isa, () => {
      for (let step = 1; step <= 3; step++) {
        SIZES.forEach((n, i) => native.adamwStep({ ...HYPER, n, step, param: one.param[i], grad: one.grad[i], expAvg: one.expAvg[i], expAvgSq: one.expAvgSq[i] }));
        native.adamwMultiStep({ ...HYPER, sizes: SIZES, step, ...many, copy });
        native.adamwMultiStep({ ...HYPER, sizes: SIZES, step, ...ref });
      }
    });
    for (const k of ['param', 'expAvg', 'expAvgSq'] as const)
      SIZES.forEach((_, i) => {
        expect(Buffer.from(many[k][i].buffer).equals(Buffer.from(one[k][i].buffer)), `${k}[${i}]`).toBe(true);
        if (SIZES[i] > 0) expect(relErr(many[k][i], ref[k][i]), `${k}[${i}]`).toBeLessThan(1e-5);
      });
    copy.forEach((c, i) => c && expect(c).toEqual(many.param[i]));
  });

  it('writes bf16 copies (Uint16Array): the new masters rounded as castBf16 rounds, the masters as without them', () => {
    const l = lists(4);
    const plain = { param: l.param.map(f32), grad: l.grad.map(f32), expAvg: l.expAvg.map(f32), expAvgSq: l.expAvgSq.map(f32) };
    const many = { param: l.param.map(f32), grad: l.grad.map(f32), expAvg: l.expAvg.map(f32), expAvgSq: l.expAvgSq.map(f32) };
    const copy = SIZES.map((n, i) => (i === 1 ? null : new Uint16Array(n))) as unknown as (Float32Array | null)[]; // (bf16 storage)
    withIsa(isa, () => {
      for (let step = 1; step <= 2; step++) {
        native.adamwMultiStep({ ...HYPER, sizes: SIZES, step, ...plain });
        native.adamwMultiStep({ ...HYPER, sizes: SIZES, step, ...many, copy });
      }
    });
    for (const k of ['param', 'expAvg', 'expAvgSq'] as const)
      SIZES.forEach((_, i) => expect(Buffer.from(many[k][i].buffer).equals(Buffer.from(plain[k][i].buffer)), `${k}[${i}]`).toBe(true));
    copy.forEach((c, i) => {
      if (!c) return;
      const want = new Uint16Array(SIZES[i]);
      native.castBf16(many.param[i], want);
      expect(bytes(c).equals(bytes(want)), `copy[${i}]`).toBe(true);
    });
  });
});

describe("AdamW under 'bf16' on the CPU", () => {
  it('writes the bf16 weight copies in its step: no recast before the next forward, the same weights as fp32 copies would give', () => {
    const config = { ...CONFIG, device: 'cpu' as const, precision: 'bf16' as const };
    const cpuBatch = (seed: number) => {
      const r = rng(seed);
      return { images: Tensor.from(Float32Array.from(randn32(2 * 3 * 8 * 8, r)), [2, 3, 8, 8]),
        targets: Tensor.from(Int32Array.from({ length: 2 }, (_, i) => (i * 3 + seed) % 5), [2]) };
    };
    const model = new ViTClassifier(config), opt = new AdamW(model.parameters(), { lr: 1e-2 });
    const ps = model.parameters();
    const step = (seed: number) => countingCasts(ps, [], () => {
      const { images, targets } = cpuBatch(seed);
      return trainStep(model, opt, images, targets);
    }).calls.cast;
    expect(step(0)).toBeGreaterThan(0); // the first forward casts every weight a bf16 product reads
    expect(step(1)).toBe(0); // the copies came from the step
    const withCopy = ps.filter(hasCopy);
    expect(withCopy.length).toBeGreaterThan(3);
    for (const p of withCopy) expect(bytes(p.storageFor('bfloat16') as unknown as Uint16Array).equals(bytes(rounded(p)))).toBe(true);
    // The same steps where the copies are recast instead (the arena update writes none): equal weights and losses.
    const other = new ViTClassifier(config), otherOpt = new AdamW(other.parameters(), { lr: 1e-2 });
    (otherOpt as unknown as { writesCopiesWith: null }).writesCopiesWith = null;
    for (const seed of [0, 1]) {
      const { images, targets } = cpuBatch(seed);
      trainStep(other, otherOpt, images, targets);
    }
    ps.forEach((p, i) => expect(bytes(p.toArray()).equals(bytes(other.parameters()[i].toArray())), `parameter ${i}`).toBe(true));
    for (const m of [model, other]) m.dispose();
    for (const o of [opt, otherOpt]) o.dispose();
  });
});

describe('adamwMultiStep arguments', () => {
  const n = [3, 2];
  const arrays = () => ({ param: n.map((k) => new Float32Array(k)), grad: n.map((k) => new Float32Array(k)),
    expAvg: n.map((k) => new Float32Array(k)), expAvgSq: n.map((k) => new Float32Array(k)) });
  it('names the list entry that is wrong', () => {
    expect(() => native.adamwMultiStep({ sizes: n, step: 1, ...arrays() })).not.toThrow();
    expect(() => native.adamwMultiStep({ sizes: n, step: 1, ...arrays(), grad: [new Float32Array(3), new Float32Array(3)] }))
      .toThrow(/adamwMultiStep: expected a Float32Array of length 2 for grad\[1\] but received Float32Array of length 3/);
    expect(() => native.adamwMultiStep({ sizes: n, step: 1, ...arrays(), expAvg: [new Float32Array(3)] }))
      .toThrow(/expected an array of 2 tensors for expAvg but received Array/);
    expect(() => native.adamwMultiStep({ sizes: [3, -1], step: 1, ...arrays() })).toThrow(/for sizes\[1\]/);
    expect(() => native.adamwMultiStep({ sizes: 3 as unknown as number[], step: 1, ...arrays() })).toThrow(/an array of integers for sizes/);
    expect(() => native.adamwMultiStep({ sizes: n, step: 1, ...arrays(), copy: [null, new Float32Array(1)] })).toThrow(/for copy\[1\]/);
    expect(() => native.adamwMultiStep({ sizes: [], step: 1, param: [], grad: [], expAvg: [], expAvgSq: [] })).not.toThrow();
  });
});

const reason = emulatorSkipReason();
if (reason) console.log(`skipping the emulated CUDA adamwMultiStep tests: ${reason}`);

/** Counts the CUDA addon's calls of `names` while `fn` runs (none given: the CUDA addon is not loaded). */
function counting<T>(names: string[], fn: () => T): { result: T; calls: Record<string, number> } {
  if (names.length === 0) return { result: fn(), calls: {} };
  const addon = cuda() as unknown as Record<string, (...a: unknown[]) => unknown>;
  const calls: Record<string, number> = Object.fromEntries(names.map((k) => [k, 0]));
  const saved = names.map((k) => addon[k]);
  names.forEach((k, i) => (addon[k] = (...a: unknown[]) => (calls[k]++, saved[i](...a))));
  try {
    return { result: fn(), calls };
  } finally {
    names.forEach((k, i) => (addon[k] = saved[i]));
  }
}

/** Counts the casts of parameters `ps` (their bf16 copies: Parameter.storageFor) while `fn` runs, with the CUDA calls of `names`. */
function countingCasts<T>(ps: Parameter[], names: string[], fn: () => T): { result: T; calls: Record<string, number> } {
  let casts = 0;
  for (const p of ps) (p as unknown as { cast: unknown }).cast = (...a: unknown[]) => (casts++, (Tensor.prototype.cast as (...x: unknown[]) => unknown).apply(p, a));
  try {
    const r = counting(names, fn);
    return { result: r.result, calls: { ...r.calls, cast: casts } };
  } finally {
    for (const p of ps) delete (p as unknown as { cast?: unknown }).cast;
  }
}
const hasCopy = (p: Parameter) => !!(p as unknown as { bf16Copy: unknown }).bf16Copy;

/** The bf16 copy a GEMM would read for p now, as bits (storageFor may recast it). */
function copyBits(p: Parameter): Uint16Array {
  const out = new Uint16Array(p.size);
  cuda().download(out, p.storageFor('bfloat16') as unknown as DeviceBuffer);
  return out;
}
const rounded = (p: Parameter) => Tensor.from(p.toArray(), [p.size]).cast('bfloat16').storage as Uint16Array;

const CONFIG = { imgSize: 8, patchSize: 4, inChannels: 3, dModel: 24, numHeads: 2, dFF: 40, depth: 2, numClasses: 5, seed: 3, dropout: 0, device: 'cuda' as const };
function batch(B: number, seed: number) {
  const r = rng(seed);
  return {
    images: Tensor.from(Float32Array.from(randn32(B * 3 * 8 * 8, r)), [B, 3, 8, 8], 'cuda'),
    targets: Tensor.from(Int32Array.from({ length: B }, (_, i) => (i * 3 + seed) % 5), [B], 'cuda'),
  };
}

describe.skipIf(reason !== null)('adamwMultiStep on the emulated CUDA backend', () => {
  beforeAll(async () => {
    await useEmulator();
    if (process.env.NF_CUBLASLT !== '0') process.env.NF_CUBLASLT_PATH ??= cublasltStandIn;
  }, 900_000);

  it('equals adamwStep per tensor bit for bit; its bf16 copies are the new masters rounded to nearest even', () => {
    const l = lists(2);
    const up = (a: Float64Array[]) => a.map((v) => Tensor.from(f32(v), [v.length], 'cuda'));
    const one = { param: up(l.param), grad: up(l.grad), expAvg: up(l.expAvg), expAvgSq: up(l.expAvgSq) };
    const many = { param: up(l.param), grad: up(l.grad), expAvg: up(l.expAvg), expAvgSq: up(l.expAvgSq) };
    const copies = SIZES.map((n, i) => (i === 2 ? null : Tensor.empty([n], 'bfloat16', 'cuda')));
    const st = (ts: Tensor[]) => ts.map((t) => t.storage as DeviceBuffer);
    const c = cuda() as unknown as Record<string, (a: object) => void>;
    for (let step = 1; step <= 2; step++) {
      SIZES.forEach((n, i) => c.adamwStep({ ...HYPER, n, step, param: one.param[i].storage, grad: one.grad[i].storage,
        expAvg: one.expAvg[i].storage, expAvgSq: one.expAvgSq[i].storage }));
      c.adamwMultiStep({ ...HYPER, sizes: SIZES, step, param: st(many.param), grad: st(many.grad), expAvg: st(many.expAvg),
        expAvgSq: st(many.expAvgSq), copy: copies.map((t) => t?.storage ?? null) });
    }
    for (const k of ['param', 'expAvg', 'expAvgSq'] as const)
      SIZES.forEach((_, i) => expect(many[k][i].toArray(), `${k}[${i}]`).toEqual(one[k][i].toArray()));
    copies.forEach((t, i) => {
      if (!t) return;
      const bits = new Uint16Array(SIZES[i]);
      cuda().download(bits, t.storage as DeviceBuffer);
      expect(bits, `copy[${i}]`).toEqual(Tensor.from(many.param[i].toArray(), [SIZES[i]]).cast('bfloat16').storage);
    });
  });

  it("AdamW: one op per group; under 'bf16' the copies stay fresh (no recast), a write from JS is recast when read", () => {
    const model = new ViTClassifier({ ...CONFIG, precision: 'bf16' });
    const ps = model.parameters();
    const opt = new AdamW([{ params: ps.slice(0, 5), weightDecay: 0 }, { params: ps.slice(5) }], { lr: 1e-2 });
    const step = (seed: number) => {
      const { images, targets } = batch(2, seed);
      return countingCasts(ps, ['adamwMultiStep', 'adamwStep'], () => trainStep(model, opt, images, targets, { cudaGraphs: false })).calls;
    };
    const first = step(0); // the first forward casts every weight a product reads
    expect(first.adamwMultiStep).toBe(2);
    expect(first.adamwStep).toBe(0);
    expect(first.cast).toBeGreaterThan(0);
    const second = step(1);
    expect(second).toEqual({ adamwMultiStep: 2, adamwStep: 0, cast: 0 }); // the copies came from the step
    const withCopy = ps.filter(hasCopy);
    expect(withCopy.length).toBeGreaterThan(3);
    const { calls } = countingCasts(ps, [], () => withCopy.map((p) => expect(copyBits(p)).toEqual(rounded(p))));
    expect(calls.cast).toBe(0);
    // A write from JS: the next read recasts.
    const p = withCopy[0];
    p.copyFrom(p.toArray().map((v) => v * 0.5 + 0.25));
    expect(countingCasts(ps, [], () => expect(copyBits(p)).toEqual(rounded(p))).calls.cast).toBe(1);
    model.dispose();
    opt.dispose();
  });

  it("'bf16' graph replays equal eager steps bit for bit, recast nothing between replays, and see a write from JS", () => {
    const N = 6;
    const run = (graphs: boolean, editAt?: number) => {
      const model = new ViTClassifier({ ...CONFIG, precision: 'bf16', dropout: 0.2, attnDropout: 0 }), opt = new AdamW(model.parameters(), { lr: 1e-2 });
      const losses: number[] = [], casts: number[] = [];
      for (let s = 0; s < N; s++) {
        opt.options.lr = 1e-2 * (1 + Math.cos(s));
        if (s === editAt) for (const p of model.parameters().filter(hasCopy).slice(0, 3)) p.copyFrom(p.toArray().map((v) => v * 0.9));
        const { images, targets } = batch(4, s);
        const r = countingCasts(model.parameters(), [], () => trainStep(model, opt, images, targets, { maxGradNorm: 0.05, cudaGraphs: graphs }));
        losses.push(r.result);
        casts.push(r.calls.cast);
      }
      const out = { losses, casts, weights: model.parameters().map((p) => p.toArray()),
        fresh: model.parameters().filter(hasCopy).every((p) => {
          const want = rounded(p);
          return copyBits(p).every((b, k) => b === want[k]);
        }) };
      model.dispose();
      opt.dispose();
      return out;
    };
    for (const editAt of [undefined, 4]) {
      const eager = run(false, editAt);
      const before = cudaGraphStats();
      const graphed = run(true, editAt);
      expect(cudaGraphStats().replays - before.replays).toBe(N - 2);
      expect(graphed.losses).toEqual(eager.losses);
      graphed.weights.forEach((w, i) => expect(Buffer.from(w.buffer).equals(Buffer.from(eager.weights[i].buffer)), `parameter ${i}`).toBe(true));
      expect(graphed.fresh && eager.fresh).toBe(true);
      // Replays after the first: no eager cast (the graph's AdamW keeps the copies), but after a write from JS.
      expect(graphed.casts.slice(3).map((c, k) => (k + 3 === editAt ? c > 0 : c === 0))).toEqual(Array(N - 3).fill(true));
    }
  });
});
