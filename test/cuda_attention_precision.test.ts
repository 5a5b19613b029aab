/**
 * The attention core's precision on device 'cuda' (the SIMT emulator, NF_CUDA_BACKEND=emulator): a
 * MultiHeadAttention at precision 'bf16' and 'tf32' (the tensor-core kernels of
 * native/cuda/flash_attention_*.cu) against the same module at 'fp32' on 'cuda' (the CUDA-core
 * kernels), forward and backward, with each precision's own tolerance on ‖Δ‖/‖ref‖ (the C++ suite's,
 * native/cuda/tests/attention_test.cpp): bf16 1e-2 forward and 3e-2 backward, tf32 2e-3 and 5e-3.
 * Self-attention with causal + key-padding masks and attention dropout (training mode: the dropout
 * mask is the same Philox stream at every precision) at head width 64, and cross-attention with an
 * attention mask at head width 40 (padded to 64 by the kernels), both at an odd length. Without
 * NF_CUBLASLT_PATH the projections run on the backend's own fp32 GEMM kernel, so the errors are the
 * core's. At 'bf16' the layer runs the attention ops on bfloat16 storage (AttentionForward<bf16>:
 * x, the saved projections and context, the output and the gradients bf16), so its cases also cover
 * that storage, and more of them run at 'bf16' only: head widths 12 and 20 (the kernels' plain-load
 * path) and 64, odd lengths 7, 65 and 197, cross-attention, key padding, dropout; and a forward and
 * backward at 'bf16' converts nothing to float32. Also: the reduced precisions really differ from fp32
 * (the tensor-core path ran); and the GPU
 * attention benchmark (native/cuda/bench/attention_bench.cu) builds over the emulator and runs its
 * --tiny shapes, printing the JSON lines bench/gpu/attention_table.py reads (its timings mean nothing).
 * And NF_CUDA_ATTENTION_DQ (read once per process: a child each, test/support/cuda_attention_dq_child.ts):
 * 'atomic' (dQ by atomic adds from the dK/dV kernel) gives the recompute pass's gradients, a misspelled
 * value fails the backward with ERR_NF_INVALID_ARG naming it and leaves the module usable.
 */
import path from 'node:path';

import { beforeAll, describe, expect, it } from 'vitest';

import { MultiHeadAttention, Tensor, type Precision } from '../lib/index';
import { randn32, relErr, rng } from './helpers';
import { emuBuildDir, emulatorSkipReason, run, runEmulatedChild, useEmulator } from './support/cuda_emu_build';

const reason = emulatorSkipReason();
if (reason) console.log(`skipping the attention precision emulator tests: ${reason}`);

const TOL: Record<'bf16' | 'tf32', { fwd: number; bwd: number }> = { bf16: { fwd: 1e-2, bwd: 3e-2 }, tf32: { fwd: 2e-3, bwd: 5e-3 } };

const floats = (shape: number[], seed: number) =>
  Tensor.from(Float32Array.from(randn32(shape.reduce((a, b) => a * b, 1), rng(seed))), shape).to('cuda');
const bools = (shape: number[], pick: (i: number) => boolean) =>
  Tensor.from(Uint8Array.from({ length: shape.reduce((a, b) => a * b, 1) }, (_, i) => (pick(i) ? 1 : 0)), shape).to('cuda');

interface Case {
  name: string;
  /** The precisions it runs at against fp32 (default both). */
  precisions?: readonly ('bf16' | 'tf32')[];
  dModel: number;
  numHeads: number;
  dropout: number;
  B: number;
  T: number;
  Tk?: number;
  options: () => Record<string, unknown>;
}

const cases: Case[] = [
  { name: 'self, head 64, causal + key padding, dropout 0.1', dModel: 128, numHeads: 2, dropout: 0.1, B: 2, T: 33,
    options: () => ({ causal: true, keyPaddingMask: bools([2, 33], (i) => i % 33 > 29 && i >= 33) }) },
  { name: 'cross, head 40 (padded), attention mask', dModel: 80, numHeads: 2, dropout: 0, B: 1, T: 7, Tk: 19,
    options: () => ({ memory: floats([1, 19, 80], 12), attnMask: bools([7, 19], (i) => (i * 7) % 5 === 0) }) },
  { name: 'self, head 12, T 65, causal', precisions: ['bf16'], dModel: 24, numHeads: 2, dropout: 0, B: 2, T: 65,
    options: () => ({ causal: true }) },
  { name: 'self, head 20, T 7, key padding, dropout 0.1', precisions: ['bf16'], dModel: 40, numHeads: 2, dropout: 0.1, B: 2, T: 7,
    options: () => ({ keyPaddingMask: bools([2, 7], (i) => i === 12 || i === 13) }) },
  { name: 'cross, head 64, T 197 against 65 keys, key padding', precisions: ['bf16'], dModel: 64, numHeads: 1, dropout: 0, B: 1, T: 197,
    Tk: 65, options: () => ({ memory: floats([1, 65, 64], 13), keyPaddingMask: bools([1, 65], (i) => i % 9 === 0) }) },
];

/** One forward and backward of the case's module at `precision`: output, dx and every gradient. */
function step(c: Case, precision: Precision) {
  const m = new MultiHeadAttention({ dModel: c.dModel, numHeads: c.numHeads, dropout: c.dropout, seed: 4, device: 'cuda', precision });
  m.train();
  const x = floats([c.B, c.T, c.dModel], 10), dy = floats([c.B, c.T, c.dModel], 11);
  const out = m.forward(x, c.options());
  const back = m.backward(dy);  // cross-attention: { dx, dMemory }
  const [dx, dMemory] = back instanceof Tensor ? [back, null] : [back.dx, back.dMemory];
  const grads: Record<string, Float32Array> = Object.fromEntries(m.namedParameters().map(([n, p]) => [`grad ${n}`, p.grad!.toArray()]));
  if (dMemory) grads.dMemory = dMemory.toArray();
  const result = { out: out.toArray(), dx: dx.toArray(), grads };
  m.dispose();
  return result;
}

describe.skipIf(reason !== null)("MultiHeadAttention at 'bf16' and 'tf32' on 'cuda' (SIMT emulator) against 'fp32'", () => {
  beforeAll(useEmulator, 900_000);

  for (const c of cases)
    it(c.name, () => {
      const ref = step(c, 'fp32');
      for (const precision of c.precisions ?? (['bf16', 'tf32'] as const)) {
        const got = step(c, precision), tol = TOL[precision];
        const errors: Record<string, number> = { out: relErr(got.out, ref.out), dx: relErr(got.dx, ref.dx) };
        for (const name of Object.keys(ref.grads)) errors[name] = relErr(got.grads[name], ref.grads[name]);
        console.log(`${c.name}, ${precision} vs fp32: ${Object.entries(errors).map(([k, e]) => `${k} ${e.toExponential(2)}`).join(', ')}`);
        expect(errors.out, `${precision} out`).toBeLessThan(tol.fwd);
        expect(errors.out, `${precision} out differs from fp32 (the tensor-core kernels ran)`).toBeGreaterThan(1e-6);
        for (const [k, e] of Object.entries(errors)) if (k !== 'out') expect(e, `${precision} ${k}`).toBeLessThan(tol.bwd);
      }
    }, 600_000);

  it("at 'bf16' the attention ops run on bfloat16 storage: a forward and backward convert nothing to float32", () => {
    const m = new MultiHeadAttention({ dModel: 64, numHeads: 2, seed: 4, device: 'cuda', precision: 'bf16' });
    m.train();
    const x = floats([2, 9, 64], 10).cast('bfloat16'), dy = floats([2, 9, 64], 11).cast('bfloat16');
    const memory = floats([2, 5, 64], 12).cast('bfloat16');
    const cast = Tensor.prototype.cast, conversions: string[] = [];
    Tensor.prototype.cast = function (this: Tensor, ...args: Parameters<Tensor['cast']>) {
      if (args[0] !== this.dtype) conversions.push(`${this.dtype} → ${args[0]}`);
      return cast.apply(this, args);
    } as Tensor['cast'];
    try {
      m.forward(x); // (makes the weights' bf16 copies, which later calls read)
      m.backward(dy);
      conversions.length = 0;
      const y = m.forward(x), dx = m.backward(dy) as Tensor;
      const cross = m.forward(x, { memory }), back = m.backward(dy) as { dx: Tensor; dMemory: Tensor };
      expect([y.dtype, dx.dtype, cross.dtype, back.dx.dtype, back.dMemory.dtype]).toEqual(Array(5).fill('bfloat16'));
      expect(conversions.filter((c) => c.startsWith('bfloat16'))).toEqual([]);
    } finally {
      Tensor.prototype.cast = cast;
      m.dispose();
    }
  }, 600_000);

  it('NF_CUDA_ATTENTION_DQ=atomic: dQ by atomic adds gives the recompute pass\'s gradients; another value is ERR_NF_INVALID_ARG', async () => {
    type Grads = { out: number[]; dx: number[]; grads: Record<string, number[]> };
    type Failure = { code: string; message: string; forwardAfter: boolean };
    const child = async (dq: string | null) =>
      (await runEmulatedChild<Record<string, Grads | Failure>>('cuda_attention_dq_child.ts',
        { NF_TEST_PRECISIONS: 'fp32,bf16', ...(dq === null ? {} : { NF_CUDA_ATTENTION_DQ: dq }) })).report;
    const [recompute, atomic] = [await child(null), await child('atomic')];
    const ref = recompute.fp32 as Grads;
    // fp32: both ways are 3xTF32 products summed in another order (the atomic adds' is the arrival order)
    // bf16: against fp32 at bf16's backward tolerance, as the recompute pass is held to
    for (const [precision, tol] of [['fp32', 1e-5], ['bf16', TOL.bf16.bwd]] as const) {
      const got = atomic[precision] as Grads;
      const errors: Record<string, number> = { out: relErr(got.out, ref.out), dx: relErr(got.dx, ref.dx) };
      for (const name of Object.keys(ref.grads)) errors[name] = relErr(got.grads[name], ref.grads[name]);
      console.log(`atomic dQ, ${precision} vs the recompute pass at fp32: ${Object.entries(errors).map(([k, e]) => `${k} ${e.toExponential(2)}`).join(', ')}`);
      for (const [k, e] of Object.entries(errors)) expect(e, `${precision} ${k}`).toBeLessThan(tol);
    }
    expect(relErr((atomic.fp32 as Grads).dx, ref.dx), 'the atomic path ran (its sums differ in order)').toBeGreaterThan(0);
    const bad = (await child('sideways')).fp32 as Failure;
    expect(bad).toMatchObject({ code: 'ERR_NF_INVALID_ARG', forwardAfter: true });
    expect(bad.message).toMatch(/NF_CUDA_ATTENTION_DQ must be 'atomic' or 'recompute', not 'sideways'/);
  }, 600_000);

  it('nf_cuda_emu_attention_bench --tiny prints one JSON line per precision, shape and pass', async () => {
    const build = await run('cmake', ['--build', emuBuildDir, '--target', 'nf_cuda_emu_attention_bench', '-j', '2']);
    expect(build.ok, build.out).toBe(true);
    const bench = await run(path.join(emuBuildDir, 'nf_cuda_emu_attention_bench'), ['--tiny']);
    expect(bench.ok, bench.out).toBe(true);
    const rows = bench.out.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(rows).toHaveLength(3 * 2 * 3);  // bf16, tf32, fp32 x causal or not x fwd, bwd (dQ recomputed), bwd (dQ atomic)
    for (const r of rows) {
      expect(r).toMatchObject({ impl: 'nodeformer', device: 'SIMT emulator', B: 1, H: 1, T: 65, Dh: 64 });
      expect(r.dq).toBe(r.pass === 'fwd' ? '' : r.dq === 'atomic' ? 'atomic' : 'recompute');
      expect(r.ms).toBeGreaterThan(0);
    }
    expect(new Set(rows.map((r) => `${r.precision} ${r.causal} ${r.pass} ${r.dq}`)).size).toBe(18);
  }, 600_000);
});
