import { execFileSync } from 'node:child_process';

import { afterAll, describe, expect, it } from 'vitest';

import { native } from '../lib/native/addon';
import type { Activation } from '../lib/native/ops.generated';
import { ErrorLog, f32, isas, randn32, relErr, rng, withIsa } from './helpers';
import { bundle, bundleEnv } from './support/bundle';
import { bf16Case, cases, shapes } from './support/gemm_cases';

const log = new ErrorLog(1e-5);
afterAll(() => log.report('gemm, largest relative error'));

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
    const run = bf16Case(cases.find((x) => x.name === name)!);
    for (const isa of isas) expect(log.add(`${isa} bf16 C`, withIsa(isa, run))).toBeLessThan(1e-5);
  });

  // Where avx512bf16 runs the AMX tiles, its vdpbf16ps kernels (the GEMM of CPUs without AMX: Zen 4)
  // still run in a child with NF_AMX=0, every case held to the same bound.
  const amx = isas.includes('avx512bf16') && withIsa('avx512bf16', () => native.isaInfo().bf16Kernels) === 'amx';
  it.runIf(amx)('every case at bf16 on the avx512bf16 variant\'s vdpbf16ps kernels (NF_AMX=0, a child process)', () => {
    const out = execFileSync(process.execPath, [bundle('test/support/gemm_bf16_child.ts')],
      { env: { ...bundleEnv(), NF_AMX: '0', NF_ISA: 'avx512bf16' }, encoding: 'utf8' });
    const child = JSON.parse(out.trim().split('\n').pop()!) as { isa: string; kernels: string; errors: number[] };
    expect([child.isa, child.kernels]).toEqual(['avx512bf16', 'vdpbf16ps']);
    child.errors.forEach((e, i) => expect(log.add('avx512bf16 vdpbf16ps bf16 C', e), cases[i].name).toBeLessThan(1e-5));
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
