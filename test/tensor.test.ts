import { describe, expect, it } from 'vitest';

import { disposeAll, Tensor } from '../lib/core/tensor';

describe('Tensor', () => {
  it('holds a copy of the data with shape and dtype', () => {
    const src = Float32Array.from([1, 2, 3, 4, 5, 6]);
    const t = Tensor.from(src, [2, 3]);
    src[0] = 99;
    expect(t.shape).toEqual([2, 3]);
    expect(t.dtype).toBe('float32');
    expect(Array.from(t.toArray())).toEqual([1, 2, 3, 4, 5, 6]);
    expect(Tensor.from(Int32Array.from([1]), [1]).dtype).toBe('int32');
    expect(Tensor.from(Uint8Array.from([1, 0]), [2]).dtype).toBe('bool');
  });

  it('empty skips the zero-fill: poisoned to NaN / -1 under NF_POISON_UNINITIALIZED (set by vitest.config.ts)', () => {
    expect(process.env.NF_POISON_UNINITIALIZED).toBe('1');
    const f = Tensor.empty([2, 3]), i = Tensor.empty([4], 'int32');
    expect([f.shape, f.dtype, i.dtype]).toEqual([[2, 3], 'float32', 'int32']);
    expect(Array.from(f.data).every(Number.isNaN)).toBe(true);
    expect(Array.from(i.data)).toEqual([-1, -1, -1, -1]);
    expect(Array.from(Tensor.zeros([3]).data)).toEqual([0, 0, 0]);
    expect(() => Tensor.empty([2], 'float16' as never)).toThrow(/for dtype/);
    expect(() => Tensor.empty([-2])).toThrow(/for shape/);
    disposeAll(f, i);
  });

  it('toArray returns an independent copy', () => {
    const t = Tensor.from(Float32Array.from([1, 2]), [2]);
    const a = t.toArray();
    a[0] = 5;
    expect(t.toArray()[0]).toBe(1);
  });

  it('rejects bad data and shapes naming the argument', () => {
    expect(() => Tensor.from(Float32Array.from([1, 2, 3]), [2, 2])).toThrow(/Expected 4 elements for shape \[2, 2\] for data/);
    expect(() => Tensor.from([1, 2] as unknown as Float32Array, [2])).toThrow(/for data but received Array/);
    expect(() => Tensor.from(new Float64Array(2) as unknown as Float32Array, [2])).toThrow(/for data but received Float64Array/);
    expect(() => Tensor.from(new Float32Array(2), [2.5] as number[])).toThrow(/for shape/);
    expect(() => Tensor.zeros([-1])).toThrow(/for shape/);
  });

  it('dispose frees the tensor and later use throws ERR_NF_DISPOSED', () => {
    const t = Tensor.from(Float32Array.from([1, 2]), [2]);
    t.dispose();
    t.dispose();
    expect(t.disposed).toBe(true);
    expect(() => t.toArray()).toThrow(/disposed/);
    try {
      t.toArray();
    } catch (e) {
      expect((e as { code: string }).code).toBe('ERR_NF_DISPOSED');
    }
  });

  it('supports `using` via Symbol.dispose', () => {
    const t = Tensor.zeros([3]);
    t[Symbol.dispose]();
    expect(t.disposed).toBe(true);
  });
});
