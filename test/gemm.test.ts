import { afterAll, describe, expect, it } from 'vitest';

import { native } from '../lib/native/addon';
import type { Activation } from '../lib/native/ops.generated';
import { ErrorLog, f32, isas, randn32, relErr, rng, roundBf16, withIsa } from './helpers';

const log = new ErrorLog(1e-5);
afterAll(() => log.report('gemm, largest relative error'));

type Case = {
  name: string; M: number; N: number; K: number; batch?: number; transA?: boolean; transB?: boolean;
  alpha?: number; beta?: number; act?: Activation; bias?: boolean; preact?: boolean;
  lda?: number; ldb?: number; ldc?: number; strideA?: number; strideB?: number; strideC?: number;
};

const cases: Case[] = [
  { name: '1x1x1', M: 1, N: 1, K: 1 },
  { name: '1x1x1 alpha beta bias', M: 1, N: 1, K: 1, alpha: 2, beta: 0.5, bias: true },
  { name: '7x13x5 transA relu', M: 7, N: 13, K: 5, transA: true, beta: 0.25, bias: true, act: 'relu', preact: true },
  { name: '197x96x72 gelu', M: 197, N: 96, K: 72, bias: true, act: 'gelu', preact: true },
  { name: '197x96x72 transB gelu_tanh', M: 197, N: 96, K: 72, transB: true, bias: true, act: 'gelu_tanh',
    preact: true },
  { name: '197x72x96 transA transB', M: 197, N: 72, K: 96, transA: true, transB: true, alpha: -0.5, beta: 1 },
  { name: 'scores 65x65x40 batch 5', M: 65, N: 65, K: 40, transB: true, alpha: 0.125, batch: 5 },
  { name: 'weights·v 65x40x65 batch 5', M: 65, N: 40, K: 65, batch: 5, beta: 0.5 },
  { name: '37x29x23 tanh (the pooler\'s activation)', M: 37, N: 29, K: 23, bias: true, act: 'tanh', preact: true },
  { name: 'K = 0: beta C + bias', M: 3, N: 5, K: 0, beta: 0.5, bias: true, act: 'relu', preact: true },
  { name: 'K = 0, beta 0', M: 4, N: 3, K: 0, alpha: 3 },
  { name: 'M = 0', M: 0, N: 5, K: 3, bias: true },
  { name: 'N = 0', M: 4, N: 0, K: 3 },
  { name: 'one row 1x384x128', M: 1, N: 384, K: 128, transB: true, bias: true, act: 'gelu', preact: true },
  { name: 'one column 33x1x300', M: 33, N: 1, K: 300, transA: true, beta: 2 },
  { name: 'k blocks 300x17x600', M: 300, N: 17, K: 600, transA: true, transB: true, beta: -1, bias: true, act: 'gelu',
    preact: true },
  { name: 'k blocks 150x40x517 relu', M: 150, N: 40, K: 517, beta: 0.5, bias: true, act: 'relu', preact: true },
  { name: 'long K 20x600x2100', M: 20, N: 600, K: 2100, transB: true },
  // K cut into ranges summed afterwards (K >= 4 max(M, N), no epilogue): weight-gradient shapes,
  // an odd K, tails of 16-float vectors in the sum, strides, alpha and beta.
  { name: 'K ranges 40x24x1100 transA (dW += dyᵀ x)', M: 40, N: 24, K: 1100, transA: true, alpha: 0.5, beta: 1 },
  { name: 'K ranges 37x70x2101 strided', M: 37, N: 70, K: 2101, transA: true, lda: 41, ldb: 73, ldc: 75 },
  { name: 'K ranges 30x9x1500 transB beta', M: 30, N: 9, K: 1500, transB: true, beta: -0.5 },
  { name: 'column blocks 2x4200x256', M: 2, N: 4200, K: 256, bias: true },
  { name: 'strided batch 3', M: 24, N: 40, K: 59, batch: 3, beta: 0.5, bias: true, act: 'gelu_tanh', preact: true,
    lda: 61, ldb: 45, ldc: 43, strideA: 24 * 61 + 7, strideB: 59 * 45 + 3, strideC: 24 * 43 + 5 },
  { name: 'strided transposed', M: 9, N: 31, K: 20, transA: true, transB: true, lda: 12, ldb: 25, ldc: 33 },
  { name: 'shared B (strideB 0)', M: 8, N: 24, K: 16, batch: 4, strideB: 0 },
  // Macro-tile counts rounded up to equal shares of the threads: 5 row blocks split into 8, and 3
  // batch entries of 2 row blocks into 3 x 4.
  { name: 'equal shares 1030x70x50 silu', M: 1030, N: 70, K: 50, transB: true, bias: true, act: 'silu', preact: true },
  { name: 'equal shares batch 3 250x40x33', M: 250, N: 40, K: 33, batch: 3, beta: 0.5, act: 'gelu', preact: true },
  // The transposing packs (A not transposed, B transposed): partial row panels (MR 4, 6, 12),
  // partial column panels (NR 4, 16, 32), k not a multiple of 8, row strides past K.
  { name: 'packing edges 13x37x29', M: 13, N: 37, K: 29, transB: true, lda: 33, ldb: 31, bias: true },
  { name: 'packing edges 5x20x19 (M < MR)', M: 5, N: 20, K: 19, transB: true, lda: 23, ldb: 19, beta: 0.5 },
  { name: 'packing edges 25x70x41', M: 25, N: 70, K: 41, transB: true, lda: 47, ldb: 44, act: 'relu', preact: true },
];

// The extent of `batch` entries of rows x cols with row stride ld and batch stride s (as the binding).
function extent(batch: number, rows: number, cols: number, ld?: number, s?: number): number {
  if (rows === 0 || cols === 0) return 0;
  const l = ld ?? cols;
  return (batch - 1) * (s ?? rows * l) + (rows - 1) * l + cols;
}

function shapes(c: Case) {
  const batch = c.batch ?? 1;
  return {
    A: c.transA ? extent(batch, c.K, c.M, c.lda, c.strideA) : extent(batch, c.M, c.K, c.lda, c.strideA),
    B: c.transB ? extent(batch, c.N, c.K, c.ldb, c.strideB) : extent(batch, c.K, c.N, c.ldb, c.strideB),
    C: extent(batch, c.M, c.N, c.ldc, c.strideC),
  };
}

describe('gemm', () => {
  describe.each(cases)('$name', (c) => {
    const r = rng(c.M * 131 + c.N * 17 + c.K * 3 + (c.batch ?? 1));
    const n = shapes(c);
    const A = randn32(n.A, r), B = randn32(n.B, r), C0 = randn32(n.C, r), bias = c.bias ? randn32(c.N, r) : null;
    const { name: _name, bias: _bias, preact: _preact, ...dims } = c;
    const C = Float64Array.from(C0), preact = c.preact ? new Float64Array(n.C) : null;
    native.gemm({ ...dims, C, preact, A, B, bias });

    it.each(isas)('%s matches the float64 reference', (isa) => {
      withIsa(isa, () => {
        const C32 = f32(C0), preact32 = c.preact ? new Float32Array(n.C) : null;
        native.gemm({ ...dims, C: C32, preact: preact32, A: f32(A), B: f32(B), bias: bias && f32(bias) });
        expect(log.add(`${isa} C`, relErr(C32, C))).toBeLessThan(1e-5);
        if (preact) expect(log.add(`${isa} preact`, relErr(preact32!, preact))).toBeLessThan(1e-5);
      });
    });
  });

  it.each(['k blocks 300', 'K ranges 37'])('%s runs the same single-threaded', (prefix) => {
    const c = cases.find((x) => x.name.startsWith(prefix))!;
    const r = rng(5);
    const n = shapes(c);
    const A = f32(randn32(n.A, r)), B = f32(randn32(n.B, r)), C0 = f32(randn32(n.C, r));
    const bias = c.bias ? f32(randn32(c.N, r)) : null;
    const { name: _name, bias: _bias, preact: _preact, ...dims } = c;
    const run = () => {
      const C = Float32Array.from(C0);
      native.gemm({ ...dims, C, A, B, bias });
      return C;
    };
    const threads = native.numThreads();
    const many = run();
    native.setNumThreads(1);
    try {
      expect(run()).toEqual(many);  // the blocking does not depend on who runs a tile
    } finally {
      native.setNumThreads(threads);
    }
  });

  // At 'bf16' the product is that of the inputs rounded to bfloat16, summed in fp32: against the
  // float64 product of the rounded inputs only the sums' rounding remains. Every case: on an Intel CPU
  // with AMX-BF16 the avx512bf16 variant runs its tiles (isaInfo().bf16Kernels 'amx'), whose blocks of
  // 16 and 32 rows, 16 pairs of k and 32 columns meet every edge of these shapes, transA (the A block
  // transposed into the tiles' layout) and not.
  it.each(cases.map((c) => c.name))('%s at bf16: the product of the bf16-rounded inputs, every variant', (name) => {
    const c = cases.find((x) => x.name === name)!;
    const r = rng(7);
    const n = shapes(c);
    const A = randn32(n.A, r), B = randn32(n.B, r), C0 = randn32(n.C, r), bias = c.bias ? randn32(c.N, r) : null;
    const { name: _name, bias: _bias, preact: _preact, ...dims } = c;
    const C = Float64Array.from(C0);
    native.gemm({ ...dims, C, A: A.map(roundBf16), B: B.map(roundBf16), bias });
    for (const isa of isas)
      withIsa(isa, () => {
        const C32 = f32(C0);
        native.gemm({ ...dims, C: C32, A: f32(A), B: f32(B), bias: bias && f32(bias), precision: 'bf16' });
        expect(log.add(`${isa} bf16 C`, relErr(C32, C))).toBeLessThan(1e-5);
      });
  });

  it('rejects bad arguments with errors naming them', () => {
    const ok = { M: 2, N: 3, K: 4, C: new Float32Array(6), A: new Float32Array(8), B: new Float32Array(12) };
    expect(() => native.gemm({ ...ok, A: new Float32Array(7) })).toThrow(/gemm: .*length 8 for A/);
    expect(() => native.gemm({ ...ok, transB: true, B: new Float32Array(11) })).toThrow(/length 12 for B/);
    expect(() => native.gemm({ ...ok, C: new Float64Array(6) })).toThrow(/Float32Array of length 6 for C/);
    expect(() => native.gemm({ ...ok, bias: new Float32Array(2) })).toThrow(/length 3 for bias/);
    expect(() => native.gemm({ ...ok, preact: new Float32Array(5) })).toThrow(/length 6 for preact/);
    expect(() => native.gemm({ ...ok, M: -1 })).toThrow(/for M/);
    expect(() => native.gemm({ ...ok, K: 1.5 })).toThrow(/for K/);
    expect(() => native.gemm({ ...ok, batch: 0 })).toThrow(/for batch/);
    expect(() => native.gemm({ ...ok, alpha: NaN })).toThrow(/for alpha/);
    expect(() => native.gemm({ ...ok, act: 'sigmoid' as Activation })).toThrow(/for act/);
    expect(() => native.gemm({ ...ok, transA: 1 as unknown as boolean })).toThrow(/for transA/);
    expect(() => native.gemm({ ...ok, lda: 3 })).toThrow(/for lda/);
    expect(() => native.gemm({ ...ok, batch: 2, strideC: 5, C: new Float32Array(11) })).toThrow(/strideC/);
    expect(() => native.gemm({ ...ok, A: null as unknown as Float32Array })).toThrow(/for A but received null/);
    // @ts-expect-error: deliberately wrong call
    expect(() => native.gemm(null)).toThrow(/expected one options object/);
    try {
      native.gemm({ ...ok, B: undefined as unknown as Float32Array });
      expect.unreachable();
    } catch (e) {
      expect((e as { code?: string }).code).toBe('ERR_NF_INVALID_ARG');
    }
  });
});
