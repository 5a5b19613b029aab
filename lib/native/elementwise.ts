import type { FloatArray } from './layernorm';

/**
 * Elementwise ops of the residual stream over flat arrays of n elements (see
 * native/cpu/elementwise.h). Dropout draws from Philox (core/philox.h): element i of the stream
 * (seed, offset) is kept when its uniform number is >= p, and kept values are scaled by 1/(1-p).
 * seed and offset are integers in [0, 2^53); use a fresh offset per dropout site and step.
 */
export interface ElementwiseOps {
  /** out = a + b (the residual add); out may be a or b. */
  add(a: { n: number; out: FloatArray; a: FloatArray; b: FloatArray }): void;
  /** y += x (merging gradients that reach a residual stream along two paths). */
  accumulate(a: { n: number; y: FloatArray; x: FloatArray }): void;
  /** out = x * keep / (1 - p), p in [0, 1) (p = 0: a copy); out may be x. */
  dropoutForward(a: { n: number; p: number; seed: number; offset: number; out: FloatArray; x: FloatArray }): void;
  /** dx = dout * keep / (1 - p) with the forward's mask, regenerated from (seed, offset); dx may be dout. */
  dropoutBackward(a: { n: number; p: number; seed: number; offset: number; dx: FloatArray; dout: FloatArray }): void;
}
