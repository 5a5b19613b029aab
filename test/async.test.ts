import { describe, expect, it } from 'vitest';

import { native } from '../lib/native/addon';
import { f32, randn32, rng } from './helpers';

describe('async ops', () => {
  const rows = 33, D = 40;
  const r = rng(3);
  const args = () => ({ rows, D, out: new Float32Array(rows * D), mean: new Float32Array(rows), rstd: new Float32Array(rows),
    x: f32(randn32(rows * D, r)), gamma: f32(randn32(D, r)), beta: f32(randn32(D, r)) });

  it('run off the main thread and give the same result as the synchronous op', async () => {
    const a = args();
    const b = { ...a, out: new Float32Array(rows * D), mean: new Float32Array(rows), rstd: new Float32Array(rows) };
    native.layernormForward(a);
    await native.layernormForwardAsync(b);
    expect(Array.from(b.out)).toEqual(Array.from(a.out));
  });

  it('reject (not throw) on invalid arguments, with the same error', async () => {
    await expect(native.layernormForwardAsync({ ...args(), D: 0 })).rejects.toMatchObject({
      code: 'ERR_NF_INVALID_ARG', message: expect.stringMatching(/for D/) });
  });

  it('many concurrent calls all settle', async () => {
    const calls = Array.from({ length: 16 }, () => args());
    await Promise.all(calls.map((a) => native.layernormForwardAsync(a)));
    for (const a of calls) expect(a.rstd.every((v) => v > 0)).toBe(true);
  });
});
