/**
 * Tensor memory on the CPU: an ordinary ArrayBuffer viewed from its first 64-byte aligned byte,
 * zero-filled by `zeros`, poisoned with NaN by `empty` under NF_POISON_UNINITIALIZED (the suite
 * sets it), freed at once by dispose() (live ArrayBuffer bytes drop), and, when an async op still
 * uses it, freed when that op settles, after the op has written its result; and malloc keeps
 * freed activations for the next step instead of returning them to the system (core/malloc_policy.h),
 * so a steady training loop faults in almost no new pages.
 */
import { execFileSync } from 'node:child_process';

import { describe, expect, it } from 'vitest';

import { native, Tensor } from '../lib';
import { bundle, bundleEnv } from './support/bundle';

const liveBuffers = () => process.memoryUsage().arrayBuffers;

describe('tensor memory', () => {
  it('views each buffer from its first 64-byte aligned byte', () => {
    for (const n of [0, 1, 3, 17, 1000, 1 << 18]) {
      for (const t of [Tensor.zeros([n]), Tensor.empty([n], 'int32'), Tensor.from(new Uint8Array(n), [n])]) {
        expect(t.data.byteOffset).toBe(native.alignedOffset(t.data.buffer as ArrayBuffer));
        expect(t.data.length).toBe(n);
      }
    }
  });

  it('zero-fills zeros() and poisons empty() with NaN (-1 as int32)', () => {
    expect(Tensor.zeros([33]).data.every((v) => v === 0)).toBe(true);
    expect(Tensor.empty([33]).data.every((v) => Number.isNaN(v))).toBe(true);
    expect(Tensor.empty([5], 'int32').data.every((v) => v === -1)).toBe(true);
  });

  it('dispose() frees the memory at once, without the GC', () => {
    const before = liveBuffers();
    const t = Tensor.zeros([1 << 20]);
    expect(liveBuffers() - before).toBeGreaterThanOrEqual(4 << 20);
    const view = t.data;
    t.dispose();
    expect(view.length).toBe(0);
    expect(liveBuffers() - before).toBeLessThan(4096);
    t.dispose();
  });

  it('a tensor disposed while an async op writes it is freed when the op settles, not before', async () => {
    const rows = 512, D = 48;
    const x = Tensor.from(Float32Array.from({ length: rows * D }, (_, i) => Math.sin(i)), [rows, D]);
    const out = Tensor.empty([rows, D]), gamma = Tensor.from(new Float32Array(D).fill(1), [D]), beta = Tensor.zeros([D]);
    const outView = out.data, xView = x.data;
    const mean = new Float32Array(rows), rstd = new Float32Array(rows);
    const p = native.layernormForwardAsync({ rows, D, out: out.data, mean, rstd, x: x.data, gamma: gamma.data, beta: beta.data });
    for (const t of [x, out]) t.dispose();
    expect(out.disposed).toBe(true);
    expect(outView.length).toBe(rows * D); // still attached while the op runs
    let detachedOnSettle = false;
    await p.then(() => {
      detachedOnSettle = outView.length === 0; // detached by the op's completion, before this runs
    });
    expect(detachedOnSettle).toBe(true);
    expect(xView.length).toBe(0);
    expect(Array.from(mean.slice(0, 3)).every(Number.isFinite)).toBe(true);
    for (const t of [gamma, beta]) t.dispose();
  });

  it('release() of a buffer twice, or of a plain ArrayBuffer, only detaches', () => {
    const b = new ArrayBuffer(64);
    native.release(b);
    native.release(b);
    expect(b.byteLength).toBe(0);
  });

  it('a steady training loop faults in almost no new pages per step (malloc keeps freed activations)', () => {
    // With NF_MALLOC_TUNING=0 and glibc's default mmap threshold held fixed (128 KiB; left alone, glibc
    // raises it as mmapped chunks are freed, so how many activations it maps again each step depends on
    // when V8's collections free them: 184-324 faults a step in most CI runs, 21.6 in one) the same loop
    // faults in every activation again each step.
    const file = bundle('test/support/fault_loop.ts');
    const run = (tuning: string, extra: Record<string, string> = {}) => JSON.parse(execFileSync(process.execPath, [file],
      { env: { ...bundleEnv(), NF_MALLOC_TUNING: tuning, ...extra }, encoding: 'utf8' })) as { policy: { applied: boolean }; faults: number };
    const tuned = run('1'), untuned = run('0', { GLIBC_TUNABLES: 'glibc.malloc.mmap_threshold=131072' });
    console.log(`minor page faults per training step: ${tuned.faults} (glibc's defaults, mmap threshold fixed: ${untuned.faults})`);
    if (!tuned.policy.applied) return void console.log('not glibc: no malloc policy to check');
    expect(untuned.policy.applied).toBe(false);
    expect(tuned.faults).toBeLessThan(200);
    expect(untuned.faults).toBeGreaterThan(3 * tuned.faults);
  });
});
