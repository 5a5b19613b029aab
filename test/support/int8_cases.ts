/**
 * The int8 linear products test/int8.test.ts runs in its own process and in a child with other int8
 * kernels (test/support/int8_child.ts): rows around the AMX block's 16 and 32 (1, 13, 16, 33, 197),
 * K with and without a tail past whole 64-byte tile rows, N past whole 32-column panels.
 */
import { native } from '../../lib/native/addon';
import { f32, randn32, rng } from '../helpers';

export interface Int8KernelCase { rows: number; K: number; N: number; act: string }

export const int8KernelCases: Int8KernelCase[] = [
  { rows: 1, K: 40, N: 12, act: 'none' },
  { rows: 13, K: 37, N: 70, act: 'gelu' },
  { rows: 16, K: 64, N: 32, act: 'relu' },
  { rows: 33, K: 132, N: 100, act: 'gelu_tanh' },
  { rows: 197, K: 768, N: 72, act: 'silu' },
];

/** y of linearForward at 'int8' for case `c` (inputs from a seed of its dims). */
export function runInt8KernelCase(c: Int8KernelCase): Float32Array {
  const r = rng(c.rows * 7 + c.K * 3 + c.N);
  const x = f32(randn32(c.rows * c.K, r)), W = f32(randn32(c.N * c.K, r, 1 / Math.sqrt(c.K))), b = f32(randn32(c.N, r, 0.2));
  const y = new Float32Array(c.rows * c.N);
  native.linearForward({ rows: c.rows, inFeatures: c.K, outFeatures: c.N, act: c.act, precision: 'int8', x, W, b, y } as never);
  return y;
}
