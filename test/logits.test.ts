/**
 * softmax, logSoftmax, argmax and topk on tensors (lib/generation/logits.ts): values against plain float64
 * loops, PyTorch's conventions (the first index on ties, NaN as the largest, topk descending with
 * ties by lower index), shapes, the Async twins, and bad input as NodeformerError.
 */
import { describe, expect, it } from 'vitest';

import {
  argmax, argmaxAsync, logSoftmax, logSoftmaxAsync, NodeformerError, softmax, softmaxAsync, Tensor, topk, topkAsync,
} from '../lib';

const x = Tensor.from(Float32Array.from([1, 2, 3, 0.5, -1, 4, 4, 0, -Infinity, 2, 10, -10]), [2, 2, 3]);

/** softmax of one row in float64. */
function softmaxRow(row: number[]): number[] {
  const m = Math.max(...row), e = row.map((v) => Math.exp(v - m)), s = e.reduce((a, b) => a + b, 0);
  return e.map((v) => v / s);
}

describe('softmax and logSoftmax along the last axis', () => {
  it('match float64 loops row by row, keep the shape, and give -inf log-probabilities for -inf logits', async () => {
    const p = softmax(x), lp = logSoftmax(x);
    expect(p.shape).toEqual([2, 2, 3]);
    const v = Array.from(x.data);
    for (let r = 0; r < 4; r++) {
      const want = softmaxRow(v.slice(r * 3, r * 3 + 3));
      for (let c = 0; c < 3; c++) {
        expect(p.data[r * 3 + c]).toBeCloseTo(want[c], 6);
        expect(lp.data[r * 3 + c]).toBeCloseTo(Math.log(want[c]), 5);
      }
    }
    expect(lp.data[8]).toBe(-Infinity);
    expect(Array.from((await softmaxAsync(x)).data)).toEqual(Array.from(p.data));
    expect(Array.from((await logSoftmaxAsync(x)).data)).toEqual(Array.from(lp.data));
  });
});

describe('argmax and topk along the last axis', () => {
  it('argmax: the first index on ties, NaN as the largest, shape without the last axis', async () => {
    const a = argmax(x);
    expect(a.shape).toEqual([2, 2]);
    expect(Array.from(a.data)).toEqual([2, 2, 0, 1]);
    expect(argmax(Tensor.from(Float32Array.from([5, 7, 7, 1]), [1, 4])).data[0]).toBe(1);
    const ties = Tensor.from(Float32Array.from([5, 7, 7, 1, NaN, 9, NaN]), [7]);
    const t = argmax(ties);
    expect(t.shape).toEqual([]);
    expect(t.data[0]).toBe(4);
    expect(Array.from((await argmaxAsync(x)).data)).toEqual([2, 2, 0, 1]);
  });

  it('topk: the k largest, descending, equal values by lower index', async () => {
    const row = Tensor.from(Float32Array.from([0.5, 3, -1, 3, 2, 3]), [1, 6]);
    const { values, indices } = topk(row, 4);
    expect(values.shape).toEqual([1, 4]);
    expect(Array.from(values.data)).toEqual([3, 3, 3, 2]);
    expect(Array.from(indices.data)).toEqual([1, 3, 5, 4]);
    const all = await topkAsync(x, 3);
    expect(Array.from(all.indices.data)).toEqual([2, 1, 0, 2, 0, 1, 0, 1, 2, 1, 0, 2]);
    expect(Array.from(all.values.data)).toEqual([3, 2, 1, 4, 0.5, -1, 4, 0, -Infinity, 10, 2, -10]);
  });

  it('rejects what is not a float32 tensor [..., V] and k outside [1, V]', () => {
    const bad: [string, () => unknown, RegExp][] = [
      ['an array', () => softmax([1, 2] as unknown as Tensor), /for logits/],
      ['an int32 tensor', () => argmax(Tensor.from(Int32Array.of(1, 2), [2])), /float32 Tensor for logits/],
      ['an empty last axis', () => logSoftmax(Tensor.zeros([2, 0])), /V >= 1/],
      ['k 0', () => topk(x, 0), /for k/],
      ['k past V', () => topk(x, 4), /integer in \[1, 3\].*for k/],
      ['k 1.5', () => topk(x, 1.5), /for k/],
    ];
    for (const [what, call, message] of bad) {
      let error: unknown;
      try {
        call();
      } catch (e) {
        error = e;
      }
      expect(error, what).toBeInstanceOf(NodeformerError);
      expect((error as NodeformerError).code, what).toBe('ERR_NF_INVALID_ARG');
      expect((error as Error).message, what).toMatch(message);
    }
  });
});
