import { afterAll, describe, expect, it } from 'vitest';

import { native } from '../lib/native/addon';
import type { PatchEmbedForwardArgs } from '../lib/native/ops.generated';

type PatchEmbedDims = Pick<PatchEmbedForwardArgs, 'B' | 'C' | 'H' | 'W' | 'P' | 'D'>;
import { dot, ErrorLog, f32, finiteDiffErr, isas, randn32, relErr, rng, withIsa } from './helpers';

const fwdLog = new ErrorLog(1e-5), bwdLog = new ErrorLog(1e-4);
afterAll(() => {
  fwdLog.report('patch embed forward, largest relative error');
  bwdLog.report('patch embed backward, largest relative error');
});

const cases: PatchEmbedDims[] = [
  { B: 1, C: 1, H: 28, W: 28, P: 4, D: 24 },
  { B: 5, C: 1, H: 28, W: 28, P: 7, D: 40 },
  { B: 5, C: 3, H: 28, W: 28, P: 7, D: 72 },
  { B: 5, C: 3, H: 32, W: 32, P: 4, D: 96 },
  { B: 1, C: 3, H: 12, W: 20, P: 4, D: 72 },
  { B: 5, C: 1, H: 20, W: 12, P: 4, D: 24 },
  { B: 3, C: 2, H: 8, W: 8, P: 8, D: 24 },   // one patch per image
  { B: 2, C: 3, H: 5, W: 7, P: 1, D: 6 },    // one pixel per patch
];

const sizes = (d: PatchEmbedDims) => {
  const N = (d.H / d.P) * (d.W / d.P), K = d.C * d.P * d.P;
  return { N, K, images: d.B * d.C * d.H * d.W, out: d.B * N * d.D, weight: d.D * K };
};

type Params = { images: Float64Array; weight: Float64Array; bias: Float64Array };

function params(d: PatchEmbedDims, seed: number): Params {
  const r = rng(seed), s = sizes(d);
  return { images: randn32(s.images, r), weight: randn32(s.weight, r, 1 / Math.sqrt(s.K)), bias: randn32(d.D, r) };
}

function refForward(d: PatchEmbedDims, p: Params): Float64Array {
  const out = new Float64Array(sizes(d).out);
  native.patchEmbedForward({ ...d, out, ...p });
  return out;
}

describe.each(isas)('patch embed (%s)', (isa) => {
  it.each(cases)('B=$B C=$C H=$H W=$W P=$P D=$D', (d) => {
    const s = sizes(d), p = params(d, d.B * 131 + d.C * 17 + d.H * 7 + d.W + d.P + d.D);
    const dout = randn32(s.out, rng(d.D));
    const ref = refForward(d, p);
    const rdi = new Float64Array(s.images), rdw = new Float64Array(s.weight), rdb = new Float64Array(d.D);
    native.patchEmbedBackward({ ...d, dimages: rdi, dweight: rdw, dbias: rdb, dout, images: p.images,
      weight: p.weight });

    withIsa(isa, () => {
      const images = f32(p.images), weight = f32(p.weight), out = new Float32Array(s.out);
      native.patchEmbedForward({ ...d, out, images, weight, bias: f32(p.bias) });
      expect(fwdLog.add(`${isa} out`, relErr(out, ref))).toBeLessThan(1e-5);
      // dimages is overwritten; parameter gradients accumulate onto what was there.
      const dimages = new Float32Array(s.images).fill(7);
      const dweight = new Float32Array(s.weight).fill(0.5), dbias = new Float32Array(d.D).fill(-0.25);
      native.patchEmbedBackward({ ...d, dimages, dweight, dbias, dout: f32(dout), images, weight });
      expect(bwdLog.add(`${isa} dimages`, relErr(dimages, rdi))).toBeLessThan(1e-4);
      expect(bwdLog.add(`${isa} dweight`, relErr(dweight, rdw.map((v) => v + 0.5)))).toBeLessThan(1e-4);
      expect(bwdLog.add(`${isa} dbias`, relErr(dbias, rdb.map((v) => v - 0.25)))).toBeLessThan(1e-4);
      // Without dimages (input images): the same parameter gradients.
      const dw2 = new Float32Array(s.weight), db2 = new Float32Array(d.D);
      native.patchEmbedBackward({ ...d, dimages: null, dweight: dw2, dbias: db2, dout: f32(dout), images, weight });
      expect(bwdLog.add(`${isa} dweight`, relErr(dw2, rdw))).toBeLessThan(1e-4);
      expect(bwdLog.add(`${isa} dbias`, relErr(db2, rdb))).toBeLessThan(1e-4);
    });
  });
});

describe('patch embed layout', () => {
  // With weight = identity [K, K] and no bias, token n of image b is patch n itself, flattened
  // (c, py, px) like Conv2d's weight; tokens run over patches in row-major order.
  it.each([cases[2], cases[4]])('token (b, gy*Gw + gx) is the flattened patch: B=$B C=$C H=$H W=$W P=$P', (shape) => {
    const s0 = sizes(shape), d = { ...shape, D: s0.K }, s = sizes(d);
    const images = randn32(s.images, rng(1));
    const weight = new Float64Array(s.K * s.K).map((_, i) => (i % (s.K + 1) === 0 ? 1 : 0));
    const expected = new Float64Array(s.out);
    const Gw = d.W / d.P;
    for (let b = 0; b < d.B; b++)
      for (let c = 0; c < d.C; c++)
        for (let y = 0; y < d.H; y++)
          for (let x = 0; x < d.W; x++) {
            const n = Math.floor(y / d.P) * Gw + Math.floor(x / d.P), k = (c * d.P + (y % d.P)) * d.P + (x % d.P);
            expected[(b * s.N + n) * s.K + k] = images[((b * d.C + c) * d.H + y) * d.W + x];
          }
    expect(relErr(refForward(d, { images, weight, bias: new Float64Array(d.D) }), expected)).toBe(0);
    for (const isa of isas) {
      withIsa(isa, () => {
        const out = new Float32Array(s.out);
        native.patchEmbedForward({ ...d, out, images: f32(images), weight: f32(weight), bias: new Float32Array(d.D) });
        expect(relErr(out, expected)).toBe(0);
      });
    }
  });
});

describe('patch embed reference', () => {
  it('matches finite differences of its own forward', () => {
    const d: PatchEmbedDims = { B: 2, C: 2, H: 8, W: 12, P: 4, D: 5 };
    const s = sizes(d), p = params(d, 9), r = rng(4);
    const w = randn32(s.out, r);
    const loss = () => dot(refForward(d, p), w);
    const di = new Float64Array(s.images), dw = new Float64Array(s.weight), db = new Float64Array(d.D);
    native.patchEmbedBackward({ ...d, dimages: di, dweight: dw, dbias: db, dout: w, ...p });
    expect(finiteDiffErr(loss, p.images, di, r)).toBeLessThan(1e-6);
    expect(finiteDiffErr(loss, p.weight, dw, r)).toBeLessThan(1e-6);
    expect(finiteDiffErr(loss, p.bias, db, r)).toBeLessThan(1e-6);
  });

  it('rejects H or W not a multiple of P, in both precisions and both directions', () => {
    for (const [H, W] of [[30, 28], [28, 30]]) {
      const d = { B: 2, C: 3, H, W, P: 4, D: 8 };
      const n = 2 * 3 * H * W;
      for (const make of [(k: number) => new Float32Array(k), (k: number) => new Float64Array(k)]) {
        const msg = new RegExp(`patchEmbed\\w+: H \\(${H}\\) and W \\(${W}\\) must be multiples of P \\(4\\)`);
        expect(() => native.patchEmbedForward({ ...d, out: make(2 * 49 * 8), images: make(n), weight: make(8 * 48),
          bias: make(8) })).toThrow(msg);
        expect(() => native.patchEmbedBackward({ ...d, dimages: make(n), dweight: make(8 * 48), dbias: make(8),
          dout: make(2 * 49 * 8), images: make(n), weight: make(8 * 48) })).toThrow(msg);
      }
    }
  });

  it('rejects bad arguments with errors naming them', () => {
    const d = { B: 2, C: 3, H: 8, W: 4, P: 4, D: 5 };
    const ok = { ...d, out: new Float32Array(20), images: new Float32Array(192), weight: new Float32Array(240),
      bias: new Float32Array(5) };
    expect(() => native.patchEmbedForward(ok)).not.toThrow();
    expect(() => native.patchEmbedForward({ ...ok, images: new Float32Array(191) })).toThrow(/patchEmbedForward: .*length 192 for images/);
    expect(() => native.patchEmbedForward({ ...ok, weight: new Float64Array(240) })).toThrow(/Float32Array of length 240 for weight/);
    expect(() => native.patchEmbedForward({ ...ok, out: new Float32Array(21) })).toThrow(/length 20 for out/);
    expect(() => native.patchEmbedForward({ ...ok, P: 0 })).toThrow(/for P/);
    expect(() => native.patchEmbedForward({ ...ok, C: 0 })).toThrow(/for C/);
    expect(() => native.patchEmbedForward({ ...ok, B: -1 })).toThrow(/for B/);
    expect(() => native.patchEmbedForward({ ...ok, H: 1e9 })).toThrow(/for H/);
    expect(() => native.patchEmbedForward({ ...ok, bias: null as unknown as Float32Array })).toThrow(/for bias/);
    // @ts-expect-error: deliberately wrong call
    expect(() => native.patchEmbedForward(null)).toThrow(/expected one options object/);
    const bwd = { ...d, dweight: new Float32Array(240), dbias: new Float32Array(5), dout: new Float32Array(20),
      images: ok.images, weight: ok.weight };
    expect(() => native.patchEmbedBackward(bwd)).not.toThrow();
    expect(() => native.patchEmbedBackward({ ...bwd, dimages: new Float32Array(5) })).toThrow(/length 192 for dimages/);
    expect(() => native.patchEmbedBackward({ ...bwd, dout: new Float32Array(5) })).toThrow(/length 20 for dout/);
    try {
      native.patchEmbedBackward({ ...bwd, D: 0 });
      expect.unreachable();
    } catch (e) {
      expect((e as { code?: string }).code).toBe('ERR_NF_INVALID_ARG');
      expect((e as Error).message).toMatch(/patchEmbedBackward: .*for D/);
    }
  });
});
