/**
 * Prepacked weights at the ops (native/ops/packed.h): packWeights against its reference twin, value
 * for value (header words included), on every ISA variant; the ops that take a packing
 * (linearForward, feedforwardForward, attentionForward self and cross, attentionDecode self and
 * cross) give bit-identical outputs with and without it, at odd shapes (widths that are no multiple
 * of 32, depths no multiple of 8 or of the k block, odd depths: a bf16 pair padded), at precision
 * fp32 and bf16 (a packing of bf16 values, or bf16 pairs on avx512bf16); and a packing made for
 * another variant, another precision or other dims is rejected with ERR_NF_INVALID_ARG naming the
 * field, synchronously and asynchronously.
 */
import { describe, expect, it } from 'vitest';

import { native } from '../lib/native/addon';
import { packedSize } from '../lib/core/prepack';
import type { Precision } from '../lib/index';
import { isas, randn32, rng, withIsa } from './helpers';

const f32 = (n: number, seed: number, scale = 1) => Float32Array.from(randn32(n, rng(seed), scale));

/** W [N, K] packed under the active variant at `precision`. */
function pack(W: Float32Array, N: number, K: number, precision: Precision = 'fp32'): Float32Array {
  const packed = new Float32Array(packedSize(N, K)).fill(NaN);
  native.packWeights({ N, K, W, packed, precision });
  return packed;
}

/** Whether a and b hold the same float32 values, bit for bit (NaN included). */
function same(a: Float32Array, b: Float32Array): boolean {
  const x = new Int32Array(a.buffer, a.byteOffset, a.length), y = new Int32Array(b.buffer, b.byteOffset, b.length);
  return x.length === y.length && x.every((v, i) => v === y[i]);
}

/** Runs `op` twice on fresh outputs (`outs`: name → length), without and with `packed`; returns both outputs. */
function twice(op: string, args: Record<string, unknown>, outs: Record<string, number>, packed: Record<string, Float32Array>) {
  const run = (extra: object) => {
    const o = Object.fromEntries(Object.entries(outs).map(([k, n]) => [k, new Float32Array(n).fill(NaN)]));
    (native as unknown as Record<string, (a: object) => void>)[op]({ ...args, ...o, ...extra });
    return o;
  };
  return { plain: run({}), packed: run(packed) };
}

function expectSame(r: ReturnType<typeof twice>, label: string) {
  for (const k of Object.keys(r.plain)) expect(same(r.plain[k], r.packed[k]), `${label}: ${k}`).toBe(true);
}

const shapes: [number, number][] = [[20, 12], [40, 300], [100, 300], [1, 1], [33, 513], [100, 12], [64, 256]];

describe.each(isas)('packWeights (%s)', (isa) => {
  it.each(shapes)('N %i, K %i: equals the reference layout value for value', (N, K) => {
    withIsa(isa, () => {
      const W = f32(N * K, N * 31 + K);
      const fast = pack(W, N, K);
      const ref = new Float64Array(packedSize(N, K)).fill(NaN);
      native.packWeights({ N, K, W: Float64Array.from(W), packed: ref });
      expect(same(fast, Float32Array.from(ref))).toBe(true);
      const words = new Int32Array(fast.buffer, 0, 16);
      expect([...words.slice(1, 6)]).toEqual([['scalar', 'avx2', 'avx512', 'neon', 'avx512bf16'].indexOf(isa),
        { scalar: 4, avx2: 16, avx512: 32, neon: 16, avx512bf16: 32 }[isa],
        { scalar: 256, avx2: 256, avx512: 512, neon: 256, avx512bf16: 512 }[isa], N, K]);
      expect([...words.slice(6)]).toEqual(new Array(10).fill(0)); // precision 0: fp32
      expect(new Int32Array(pack(W, N, K, 'bf16').buffer, 0, 16)[6]).toBe(2); // precision 2: bf16
      expect(same(pack(W, N, K, 'tf32'), fast)).toBe(true); // the CPU computes tf32 as fp32
    });
  });
});

const variants = isas.flatMap((isa) => (['fp32', 'bf16'] as const).map((precision) => [isa, precision] as const));

describe.each(variants)('ops with and without prepacked weights are bit-identical (%s, %s)', (isa, precision) => {
  const packAt = (W: Float32Array, N: number, K: number) => pack(W, N, K, precision);
  it.each([[1, 20, 12], [5, 40, 300], [197, 100, 300], [3, 33, 513], [64, 12, 20]])('linearForward rows %i, out %i, in %i', (rows, N, K) => {
    withIsa(isa, () => {
      const W = f32(N * K, 1, 0.2);
      const args = { rows, inFeatures: K, outFeatures: N, act: 'gelu', x: f32(rows * K, 2), W, b: f32(N, 3), precision };
      expectSame(twice('linearForward', args, { y: rows * N, preact: rows * N }, { WPacked: packAt(W, N, K) }), 'linear');
    });
  });

  it.each([[7, 20, 100], [197, 40, 300]])('feedforwardForward rows %i, D %i, F %i', (rows, D, F) => {
    withIsa(isa, () => {
      const W1 = f32(F * D, 4, 0.3), W2 = f32(D * F, 5, 0.3);
      const args = { rows, D, F, activation: 'gelu', x: f32(rows * D, 6), W1, b1: f32(F, 7), W2, b2: f32(D, 8), precision };
      expectSame(twice('feedforwardForward', args, { y: rows * D, h: rows * F, a: rows * F },
        { W1Packed: packAt(W1, F, D), W2Packed: packAt(W2, D, F) }), 'feedforward');
    });
  });

  // D 24: the cross-attention K|V columns start inside a panel (read unpacked); D 64: on a panel boundary.
  it.each([[24, 3], [64, 4]])('attentionForward and attentionDecode, D %i, H %i, self and cross', (D, H) => {
    withIsa(isa, () => {
      const B = 2, Tq = 5, Tk = 7, maxT = 6, t = 3;
      const Wqkv = f32(3 * D * D, 9, 1 / Math.sqrt(D)), Wproj = f32(D * D, 10, 1 / Math.sqrt(D));
      const weights = { qkvWeight: Wqkv, qkvBias: f32(3 * D, 11), projWeight: Wproj, projBias: f32(D, 12), precision };
      const packed = { qkvWeightPacked: packAt(Wqkv, 3 * D, D), projWeightPacked: packAt(Wproj, D, D) };
      const self = { B, Tq, D, H, causal: true, x: f32(B * Tq * D, 13), ...weights };
      expectSame(twice('attentionForward', self, { out: B * Tq * D, qkv: B * Tq * 3 * D, ctx: B * Tq * D, lse: B * H * Tq }, packed), 'self');
      const cross = { B, Tq, Tk, D, H, x: f32(B * Tq * D, 14), memory: f32(B * Tk * D, 15), ...weights };
      expectSame(twice('attentionForward', cross, { out: B * Tq * D, q: B * Tq * D, kv: B * Tk * 2 * D, ctx: B * Tq * D, lse: B * H * Tq },
        packed), 'cross');
      const cache = f32(B * maxT * 2 * D, 16);
      const step = { B, D, H, t, maxT, x: f32(B * D, 17), ...weights };
      const r = twice('attentionDecode', { ...step, cache: cache.slice() }, { out: B * D }, packed);
      expectSame(r, 'decode self');
      const decodeCross = { B, D, H, Tk, kv: f32(B * Tk * 2 * D, 18), x: f32(B * D, 19), ...weights };
      expectSame(twice('attentionDecode', decodeCross, { out: B * D }, packed), 'decode cross');
    });
  });
});

describe('a packing that does not fit is rejected, naming the field', () => {
  const N = 20, K = 12, rows = 3;
  const W = f32(N * K, 20), args = { rows, inFeatures: K, outFeatures: N, y: new Float32Array(rows * N), x: f32(rows * K, 21), W };
  const error = (f: () => unknown) => {
    try {
      f();
    } catch (e) {
      return e as Error & { code?: string };
    }
    throw new Error('did not throw');
  };

  it.skipIf(isas.length < 2)('one packed for another ISA variant (after setIsa), sync and async', async () => {
    const [first, second] = isas;
    const packed = withIsa(first, () => pack(W, N, K));
    await withIsa(second, async () => {
      const e = error(() => native.linearForward({ ...args, WPacked: packed }));
      expect(e.code).toBe('ERR_NF_INVALID_ARG');
      expect(e.message).toMatch(new RegExp(`linear_forward: expected WPacked packed by packWeights for the active kernels, ${second} \\(NR \\d+, KC \\d+\\), ` +
        `but received one packed for ${first} \\(NR \\d+, KC \\d+\\): repack it after setIsa`));
      await expect(native.linearForwardAsync({ ...args, WPacked: packed })).rejects.toMatchObject({ code: 'ERR_NF_INVALID_ARG', message: /WPacked/ });
    });
  });

  it('one packed at another precision (bf16 for an fp32 op, fp32 for a bf16 one)', () => {
    for (const [made, used] of [['bf16', 'fp32'], ['fp32', 'bf16']] as const) {
      const e = error(() => native.linearForward({ ...args, WPacked: pack(W, N, K, made), precision: used }));
      expect(e.code).toBe('ERR_NF_INVALID_ARG');
      expect(e.message).toMatch(new RegExp(`expected WPacked packed by packWeights at precision '${used}' but received one packed at '${made}'`));
    }
  });

  it('one of other dims (of the same length)', () => {
    const other = pack(f32(30 * K, 22), 30, K); // 30 and 20 both pad to 32 columns
    const e = error(() => native.linearForward({ ...args, WPacked: other }));
    expect(e.code).toBe('ERR_NF_INVALID_ARG');
    expect(e.message).toMatch(/expected WPacked packed by packWeights of a weight \[20, 12\] but received one of \[30, 12\]/);
    const ff = { rows, D: K, F: N, y: new Float32Array(rows * K), a: new Float32Array(rows * N), x: f32(rows * K, 23), W1: W, b1: f32(N, 24),
      W2: f32(K * N, 25), b2: f32(K, 26) };
    expect(error(() => native.feedforwardForward({ ...ff, W1Packed: other }))).toMatchObject({ code: 'ERR_NF_INVALID_ARG', message: /W1Packed/ });
  });

  it('one that is no packing at all, and one of the wrong length', () => {
    expect(error(() => native.linearForward({ ...args, WPacked: new Float32Array(packedSize(N, K)) })))
      .toMatchObject({ code: 'ERR_NF_INVALID_ARG', message: /WPacked.*not a packWeights header/ });
    expect(error(() => native.linearForward({ ...args, WPacked: new Float32Array(packedSize(N, K) + 1) })))
      .toMatchObject({ code: 'ERR_NF_INVALID_ARG', message: /for WPacked/ });
  });
});
