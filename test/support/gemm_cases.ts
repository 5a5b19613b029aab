/**
 * The gemm cases of test/gemm.test.ts (shapes, transposes, strides, batches, k blocks and K ranges,
 * every packing edge), shared with its child test/support/gemm_bf16_child.ts.
 */
import { native } from '../../lib/native/addon';
import type { Activation } from '../../lib/native/ops.generated';
import { f32, randn32, relErr, rng, roundBf16 } from '../helpers';

export type Case = {
  name: string; M: number; N: number; K: number; batch?: number; transA?: boolean; transB?: boolean;
  alpha?: number; beta?: number; act?: Activation; bias?: boolean; preact?: boolean;
  lda?: number; ldb?: number; ldc?: number; strideA?: number; strideB?: number; strideC?: number;
};

export const cases: Case[] = [
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

export function shapes(c: Case) {
  const batch = c.batch ?? 1;
  return {
    A: c.transA ? extent(batch, c.K, c.M, c.lda, c.strideA) : extent(batch, c.M, c.K, c.lda, c.strideA),
    B: c.transB ? extent(batch, c.N, c.K, c.ldb, c.strideB) : extent(batch, c.K, c.N, c.ldb, c.strideB),
    C: extent(batch, c.M, c.N, c.ldc, c.strideC),
  };
}

/**
 * Case `c` at 'bf16' (random inputs): returns a function that runs it on the active variant and gives
 * its relative error against the float64 product of the bf16-rounded inputs (only the fp32 sums'
 * rounding should remain).
 */
export function bf16Case(c: Case): () => number {
  const r = rng(7);
  const n = shapes(c);
  const A = randn32(n.A, r), B = randn32(n.B, r), C0 = randn32(n.C, r), bias = c.bias ? randn32(c.N, r) : null;
  const { name: _name, bias: _bias, preact: _preact, ...dims } = c;
  const C = Float64Array.from(C0);
  native.gemm({ ...dims, C, A: A.map(roundBf16), B: B.map(roundBf16), bias });
  return () => {
    const C32 = f32(C0);
    native.gemm({ ...dims, C: C32, A: f32(A), B: f32(B), bias: bias && f32(bias), precision: 'bf16' });
    return relErr(C32, C);
  };
}
