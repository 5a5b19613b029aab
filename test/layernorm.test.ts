/**
 * LayerNorm's argument checks. Its parity with the float64 reference on every ISA variant and the
 * CUDA emulator, and the reference's finite-difference check, are the op table's
 * (test/ops_parity.test.ts, family layernormForward / layernormBackward, the same shapes).
 */
import { describe, expect, it } from 'vitest';

import { native } from '../lib/native/addon';

describe('layernorm arguments', () => {
  it('rejects bad arguments with errors naming them', () => {
    const ok = { rows: 2, D: 3, out: new Float32Array(6), mean: new Float32Array(2), rstd: new Float32Array(2),
      x: new Float32Array(6), gamma: new Float32Array(3), beta: new Float32Array(3) };
    expect(() => native.layernormForward({ ...ok, x: new Float32Array(5) })).toThrow(/layernormForward: .*length 6 for x/);
    expect(() => native.layernormForward({ ...ok, gamma: new Float64Array(3) })).toThrow(/Float32Array of length 3 for gamma/);
    expect(() => native.layernormForward({ ...ok, D: 0 })).toThrow(/for D/);
    expect(() => native.layernormForward({ ...ok, eps: NaN })).toThrow(/for eps/);
    expect(() => native.layernormForward({ ...ok, residual: new Float32Array(6) })).toThrow(/for sum/);
    // @ts-expect-error: deliberately wrong call
    expect(() => native.layernormForward(null)).toThrow(/expected one options object/);
    try {
      native.layernormForward({ ...ok, beta: undefined as unknown as Float32Array });
    } catch (e) {
      expect((e as { code?: string }).code).toBe('ERR_NF_INVALID_ARG');
    }
  });
});
