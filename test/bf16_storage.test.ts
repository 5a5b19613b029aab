/**
 * bfloat16 activations on the CPU: precision 'bf16''s storage (half the bytes of float32), for the ops
 * with a CPU bf16 kernel (opSchema's `bf16`): feedforwardForward/Backward and linearForward/Backward
 * (and adamwMultiStep, whose bf16 arrays are the weight copies it writes: test/optim_multi.test.ts).
 * - Tensor.cast and castBf16: float32 → bf16 rounds as the kernels' stores do (vround_bf16: to nearest
 *   even, denormals to signed zero, NaN kept quiet, ±inf kept), bf16 → float32 widens exactly; on every
 *   variant (this is also the lane test of simd.h's vload_bf16_w / vstore_bf16_w, which it runs).
 * - The ops (test/support/bf16_storage_cases.ts), on every variant, and where the avx512bf16 variant runs
 *   AMX tiles also on its vdpbf16ps kernels (a child with NF_AMX=0): against the float64 reference on the
 *   same bf16 values, forward outputs within 1e-2 and gradients within 3e-2 (the bf16 tolerances of the
 *   CUDA kernels); and against the same op on float32 storage at 'bf16': the bf16 outputs are its outputs
 *   rounded, bit for bit, and the weight gradients equal, wherever storage changes nothing but the final
 *   rounding (the products round their inputs to bf16 either way).
 * - Errors: bf16 activations at another precision, a mix of storages.
 * - Modules: FeedForward and Linear at 'bf16' on the CPU run their ops on bf16 activations in training
 *   (converting at their boundary: the other layers keep float32) and match the fp32 module within 3e-2;
 *   in eval mode, with no backward to keep activations for, on float32.
 */
import { execFileSync } from 'node:child_process';

import { afterAll, describe, expect, it } from 'vitest';

import { FeedForward, Linear, native, Tensor } from '../lib/index';
import { supportsBf16 } from '../lib/core/device';
import { failure, isas, randn32, relErr, rng, roundBf16, withIsa } from './helpers';
import { bundle, bundleEnv } from './support/bundle';
import { feedForwardCase, feedForwardCases, linearCase, linearCases, type Result } from './support/bf16_storage_cases';

const report: string[] = [];
afterAll(() => console.log(`bf16 activations on the CPU, largest relative errors against float64 (limits: forward 1e-2, gradients 3e-2):\n${report.join('\n')}`));

const FORWARD = new Set(['h', 'a', 'y', 'preact']);
function check(label: string, r: Result): void {
  const worst = Object.entries(r.errors).map(([k, e]) => `${k} ${e.toExponential(2)}`).join(', ');
  report.push(`  ${label}: ${worst}`);
  for (const [k, e] of Object.entries(r.errors)) expect(e, `${label} ${k}`).toBeLessThan(FORWARD.has(k) ? 1e-2 : 3e-2);
  for (const [k, ok] of Object.entries(r.exact)) expect(ok, `${label} ${k}: not the float32-storage result rounded`).toBe(true);
}

describe('castBf16 (Tensor.cast on the CPU)', () => {
  const special = [1, 1 + 1 / 256, 1 + 3 / 256, -2.5, 3.1415927, 1e-40, -1e-40, 1.1754944e-38, 3.4e38, 3.3961776e38,
    Infinity, -Infinity, NaN, -0, 0, 65504.5];
  const x = Float32Array.from([...special, ...randn32(1000, rng(3), 100)]);
  it.each(isas)('%s: rounds to nearest even (denormals to zero, NaN quiet, ±inf kept) and widens exactly', (isa) => {
    withIsa(isa, () => {
      const b = new Uint16Array(x.length);
      native.castBf16(x, b);
      const back = new Float32Array(x.length);
      native.castBf16(b, back);
      for (let i = 0; i < x.length; i++) expect(Object.is(back[i], roundBf16(x[i])) || (Number.isNaN(back[i]) && Number.isNaN(x[i])), `${x[i]}`).toBe(true);
      const t = Tensor.from(x, [x.length]).cast('bfloat16');
      expect([...t.data]).toEqual([...b]);
      expect([...t.cast('float32').data]).toEqual([...back]);
    });
  });
  it('rejects anything but a Float32Array and a Uint16Array of the same length', () => {
    expect(failure(() => native.castBf16(new Float32Array(3), new Uint16Array(2)))?.code).toBe('ERR_NF_INVALID_ARG');
    expect(failure(() => native.castBf16(new Float32Array(3), new Float32Array(3) as never))?.code).toBe('ERR_NF_INVALID_ARG');
  });
});

describe('the ops on bf16 activations', () => {
  it('opSchema says which ops have a bf16 kernel on the CPU', () => {
    // (adamwMultiStep: fp32 masters, its bf16 `copy` outputs the weight copies: test/optim_multi.test.ts)
    for (const op of ['feedforwardForward', 'feedforwardBackward', 'linearForward', 'linearBackward', 'adamwMultiStep'])
      expect(supportsBf16(op, 'cpu'), op).toBe(true);
    for (const op of ['add', 'layernormForward', 'attentionForward', 'adamwStep']) expect(supportsBf16(op, 'cpu'), op).toBe(false);
  });

  for (const isa of isas) {
    it.each(feedForwardCases.map((c) => c.name))(`${isa}: feed-forward %s`, (name) => {
      check(`${isa} feed-forward ${name}`, withIsa(isa, () => feedForwardCase(feedForwardCases.find((c) => c.name === name)!)));
    });
    it.each(linearCases.map((c) => c.name))(`${isa}: Linear %s`, (name) => {
      check(`${isa} Linear ${name}`, withIsa(isa, () => linearCase(linearCases.find((c) => c.name === name)!)));
    });
  }

  const amx = isas.includes('avx512bf16') && withIsa('avx512bf16', () => native.isaInfo().bf16Kernels) === 'amx';
  it.runIf(amx)("every case on the avx512bf16 variant's vdpbf16ps kernels (NF_AMX=0, a child process)", () => {
    const out = execFileSync(process.execPath, [bundle('test/support/bf16_storage_child.ts')],
      { env: { ...bundleEnv(), NF_AMX: '0', NF_ISA: 'avx512bf16' }, encoding: 'utf8' });
    const child = JSON.parse(out.trim().split('\n').pop()!) as { isa: string; kernels: string; feedForward: Result[]; linear: Result[] };
    expect([child.isa, child.kernels]).toEqual(['avx512bf16', 'vdpbf16ps']);
    child.feedForward.forEach((r, i) => check(`avx512bf16 vdpbf16ps feed-forward ${feedForwardCases[i].name}`, r));
    child.linear.forEach((r, i) => check(`avx512bf16 vdpbf16ps Linear ${linearCases[i].name}`, r));
  });

  it('bf16 activations at another precision, or a mix of storages, are ERR_NF_INVALID_ARG naming the problem', () => {
    const ok = { rows: 2, inFeatures: 3, outFeatures: 4, y: new Uint16Array(8), x: new Uint16Array(6), W: new Uint16Array(12) };
    expect(() => native.linearForward({ ...ok, precision: 'bf16' } as never)).not.toThrow();
    const e = failure(() => native.linearForward({ ...ok, precision: 'fp32' } as never));
    expect(e?.code).toBe('ERR_NF_INVALID_ARG');
    expect(e?.message).toMatch(/precision 'bf16'/);
    const mixed = failure(() => native.linearForward({ ...ok, precision: 'bf16', y: new Float32Array(8) } as never));
    expect(mixed?.code).toBe('ERR_NF_INVALID_ARG');
    expect(mixed?.message).toMatch(/Uint16Array of length 8 for y/);
  });
});

describe("FeedForward and Linear at 'bf16' on the CPU", () => {
  /** Runs fn recording the activation arrays the FF and Linear ops get: their types. */
  function storages(fn: () => void): Set<string> {
    const seen = new Set<string>();
    const addon = native as unknown as Record<string, (a: object) => unknown>;
    const names = ['feedforwardForward', 'feedforwardBackward', 'linearForward', 'linearBackward'];
    const saved = names.map((n) => addon[n]);
    names.forEach((n, i) => { addon[n] = (a: object) => { for (const k of ['x', 'y', 'h', 'a', 'dy', 'dx']) if ((a as Record<string, unknown>)[k]) seen.add(`${n} ${k} ${(a as Record<string, object>)[k].constructor.name}`); return saved[i](a); }; });
    try {
      fn();
    } finally {
      names.forEach((n, i) => { addon[n] = saved[i]; });
    }
    return seen;
  }

  it.each([
    ['FeedForward', () => new FeedForward({ dModel: 20, dFF: 52, seed: 3 })],
    ['Linear', () => new Linear({ inFeatures: 20, outFeatures: 13, seed: 3 })],
  ] as const)('%s: bf16 activations in its ops in training, float32 outside and in eval, within 3e-2 of fp32', (_, make) => {
    const x = Tensor.from(Float32Array.from(randn32(7 * 20, rng(5))), [7, 20]);
    const run = (precision: 'fp32' | 'bf16') => {
      const m = make().setPrecision(precision);
      let y!: Tensor, dx!: Tensor;
      const seen = storages(() => {
        y = m.forward(x);
        dx = m.backward(Tensor.from(Float32Array.from(randn32(y.size, rng(6))), [...y.shape]));
      });
      const out = { y: y.toArray(), dx: dx.toArray(), dtypes: [y.dtype, dx.dtype], grads: m.parameters().map((p) => p.grad!.toArray()),
        paramDTypes: [...new Set(m.parameters().map((p) => p.dtype))], seen };
      m.dispose();
      return out;
    };
    const fp32 = run('fp32'), bf16 = run('bf16');
    expect([...bf16.seen].every((s) => s.endsWith('Uint16Array')), [...bf16.seen].join('; ')).toBe(true);
    expect([...fp32.seen].every((s) => s.endsWith('Float32Array'))).toBe(true);
    expect(bf16.dtypes).toEqual(['float32', 'float32']);
    expect(bf16.paramDTypes).toEqual(['float32']);
    expect(relErr(bf16.y, fp32.y)).toBeLessThan(3e-2);
    expect(relErr(bf16.dx, fp32.dx)).toBeLessThan(3e-2);
    bf16.grads.forEach((g, i) => expect(relErr(g, fp32.grads[i])).toBeLessThan(3e-2));
    const m = make().setPrecision('bf16');
    m.eval();
    const seen = storages(() => m.forward(x).dispose());
    expect([...seen].every((s) => s.endsWith('Float32Array')), [...seen].join('; ')).toBe(true);
    m.dispose();
  });
});
