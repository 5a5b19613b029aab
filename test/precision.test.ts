/**
 * Precision, a module property (DESIGN.md; README, Devices): config.precision, setPrecision and the
 * precision getter, children following their parent, validation, precision not saved with the
 * config, and the raw ops' `precision` field; on the CPU 'tf32' computes exactly fp32 (bit for bit)
 * and 'bf16' the products of bf16-rounded inputs (test/bf16_cpu.test.ts holds it to fp32 per model). On the SIMT emulator with the CPU stand-in for
 * cuBLASLt (which rounds the products' inputs as the compute mode says; a child process, as
 * test/cuda_cublaslt.test.ts, because the library is chosen once per process), a ViTClassifier forward
 * and backward at each precision against the same model at fp32 on the CPU, each precision with its
 * own tolerance: fp32 1e-4 (as every CUDA test), tf32 3e-3, bf16 3e-2 (the largest errors are
 * printed); and the GEMM counters show the compute mode reached cuBLASLt. No GPU has measured them.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import path from 'node:path';

import { beforeAll, describe, expect, it } from 'vitest';

import {
  crossEntropy, Linear, loadModel, Module, saveModel, Tensor, ViTClassifier, type CudaGemmInfo, type Precision,
} from '../lib/index';
import type { Program } from '../lib/core/program';
import { native } from '../lib/native/addon';
import { failure, randn32, rng } from './helpers';
import { buildEmulated, cublasltStandIn, emulatorSkipReason, runEmulatedChild, useEmulator } from './support/cuda_emu_build';

const small = { imgSize: 8, patchSize: 4, inChannels: 3, dModel: 16, numHeads: 2, dFF: 24, depth: 2, numClasses: 3, seed: 3 };

/** A module that adds a child made at fp32 (addModule hands it the parent's precision). */
class Wrapper extends Module {
  readonly inner: Linear;
  constructor(precision?: Precision) {
    super();
    this.placeOn({ precision });
    this.inner = this.addModule('inner', new Linear({ inFeatures: 4, outFeatures: 2 }));
  }
  *forwardProgram(x: Tensor): Program<Tensor<'float32'>> {
    return yield* this.inner.forwardOps(x);
  }
  *backwardProgram(dy: Tensor): Program<Tensor<'float32'>> {
    return yield* this.inner.backwardOps(dy);
  }
}

const precisions = (m: Module) => [...new Set(m.modules().map((c) => c.precision))];

describe('precision on the CPU', () => {
  it("defaults to 'fp32'; config.precision and setPrecision set it on the module and every child", () => {
    const m = new ViTClassifier(small);
    expect(m.precision).toBe('fp32');
    expect(precisions(m)).toEqual(['fp32']);
    const t = new ViTClassifier({ ...small, precision: 'tf32' });
    expect(t.precision).toBe('tf32');
    expect(precisions(t)).toEqual(['tf32']);
    expect(m.setPrecision('tf32')).toBe(m);
    expect(precisions(m)).toEqual(['tf32']);
    m.setPrecision('fp32');
    expect(precisions(m)).toEqual(['fp32']);
    expect(new Linear({ inFeatures: 2, outFeatures: 2, precision: 'tf32' }).precision).toBe('tf32');
  });

  it('a child added with addModule takes its parent precision', () => {
    const w = new Wrapper('tf32');
    expect(w.inner.precision).toBe('tf32');
    expect(new Wrapper().inner.precision).toBe('fp32');
  });

  it("'bf16' on the CPU: config.precision, setPrecision and children as every precision", () => {
    const m = new ViTClassifier({ ...small, precision: 'tf32' });
    expect(precisions(m.setPrecision('bf16'))).toEqual(['bf16']);
    expect(precisions(new ViTClassifier({ ...small, precision: 'bf16' }))).toEqual(['bf16']);
    expect(new Linear({ inFeatures: 2, outFeatures: 2, precision: 'bf16' }).precision).toBe('bf16');
    expect(new Wrapper('bf16').inner.precision).toBe('bf16');
  });

  it('an unknown precision is ERR_NF_INVALID_ARG naming config.precision / precision; a misspelt key gets "did you mean"', () => {
    const a = failure(() => new ViTClassifier({ ...small, precision: 'fp16' as Precision }));
    expect(a?.code).toBe('ERR_NF_INVALID_ARG');
    expect(a?.message).toMatch(/config\.precision/);
    expect(a?.message).toMatch(/'fp32', 'tf32', 'bf16' or 'int8'/);
    const b = failure(() => new ViTClassifier(small).setPrecision('half' as Precision));
    expect(b?.code).toBe('ERR_NF_INVALID_ARG');
    expect(b?.message).toMatch(/for precision but received/);
    const c = failure(() => new Linear({ inFeatures: 2, outFeatures: 2, precison: 'tf32' } as never));
    expect(c?.code).toBe('ERR_NF_INVALID_ARG');
    expect(c?.message).toMatch(/did you mean 'precision'/);
  });

  it('precision is not saved with the config: the file is fp32 and loads at fp32 (then any precision)', () => {
    const m = new ViTClassifier({ ...small, precision: 'tf32' });
    expect(Object.keys(m.config)).not.toContain('precision');
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nf-precision-'));
    try {
      const file = path.join(dir, 'model.nfm');
      saveModel(file, m);
      const loaded = loadModel(file, ViTClassifier);
      expect(loaded.precision).toBe('fp32');
      for (const [name, p] of m.namedParameters()) expect(loaded.stateDict()[name].toArray()).toEqual(p.toArray());
      expect(loaded.setPrecision('tf32').precision).toBe('tf32');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it("'tf32' computes exactly fp32 on the CPU (forward and backward, bit for bit)", () => {
    const run = (precision: Precision) => {
      const m = new ViTClassifier({ ...small, precision });
      const x = Tensor.from(Float32Array.from(randn32(2 * 3 * 8 * 8, rng(5))), [2, 3, 8, 8]);
      const logits = m.forward(x);
      const { grad } = crossEntropy(logits, Tensor.from(Int32Array.from([0, 2]), [2]));
      const dx = m.backward(grad);
      return { logits: logits.toArray(), dx: dx.toArray(), grads: m.parameters().map((p) => p.grad!.toArray()) };
    };
    const a = run('fp32'), b = run('tf32');
    expect(b.logits).toEqual(a.logits);
    expect(b.dx).toEqual(a.dx);
    expect(b.grads).toEqual(a.grads);
  });

  it("the raw ops take a `precision` field: the CPU kernels compute fp32 for 'tf32' and round the products' inputs to bf16 for 'bf16'", () => {
    // 1 + 2^-8 is a tie between two bf16 values (1 and 1 + 2^-7): it rounds to even, 1; 1 + 3·2^-8 rounds up to 1 + 2^-6.
    const x = Float32Array.from([1 + 2 ** -8, 1 + 3 * 2 ** -8]), W = Float32Array.from([1, 0, 0, 1 + 2 ** -9]);
    const dims = { rows: 1, inFeatures: 2, outFeatures: 2 };
    const y32 = new Float32Array(2), ytf = new Float32Array(2), ybf = new Float32Array(2);
    native.linearForward({ ...dims, y: y32, x, W });
    native.linearForward({ ...dims, y: ytf, x, W, precision: 'tf32' });
    expect(ytf).toEqual(y32);
    native.linearForward({ ...dims, y: ybf, x, W, precision: 'bf16' });
    expect([...ybf]).toEqual([1, 1 + 2 ** -6]); // W's 1 + 2^-9 rounds to 1
    const c = new Float32Array(1);
    native.gemm({ M: 1, N: 1, K: 1, A: x.subarray(1, 2), B: W.subarray(3, 4), C: c, precision: 'bf16' });
    expect(c[0]).toBe(1 + 2 ** -6);
    const g = failure(() => native.linearForward({ ...dims, y: new Float32Array(2), x, W, precision: 'fp16' as Precision }));
    expect(g?.code).toBe('ERR_NF_INVALID_ARG');
    expect(g?.message).toMatch(/linearForward: expected 'fp32', 'tf32', 'bf16' or 'int8' for precision/);
  });
});

const reason = emulatorSkipReason();
if (reason) console.log(`skipping the precision emulator tests: ${reason}`);
const TOL: Record<'fp32' | 'tf32' | 'bf16', number> = { fp32: 1e-4, tf32: 3e-3, bf16: 3e-2 }; // ('int8' is CPU inference)

type Result = { precision: string; errors: Record<string, number>; calls: CudaGemmInfo['calls'] };
type Report = { gemm: CudaGemmInfo; results: Record<Precision, Result> };

/** Runs test/support/precision_child.ts with the stand-in loaded, at each of `precisions`. */
async function child(precisions: Precision[]): Promise<Report> {
  return (await runEmulatedChild<Report>('precision_child.ts', { NF_CUBLASLT_PATH: cublasltStandIn, NF_TEST_PRECISIONS: precisions.join(',') })).report;
}

describe.skipIf(reason !== null)('precision on CUDA (SIMT emulator, cuBLASLt stand-in)', () => {
  beforeAll(async () => {
    const build = await buildEmulated();
    expect(build.ok, build.out).toBe(true);
  }, 900_000);

  it('a ViTClassifier forward + backward at fp32, tf32 and bf16 matches the CPU fp32 model within each precision\'s tolerance; the mode reaches cuBLASLt', async () => {
    const report = await child(['fp32', 'tf32', 'bf16']);
    expect(report.gemm).toMatchObject({ backend: 'cublaslt', standIn: true });
    for (const precision of ['fp32', 'tf32', 'bf16'] as const) {
      const r = report.results[precision], tol = TOL[precision];
      expect(r.precision).toBe(precision);
      const grads = Object.entries(r.errors).filter(([k]) => k.startsWith('grad '));
      const [worst, e] = grads.reduce((a, b) => (b[1] > a[1] ? b : a));
      console.log(`${precision}: logits ${r.errors.logits.toExponential(2)}, loss ${r.errors.loss.toExponential(2)}, all gradients ` +
        `${r.errors['all gradients'].toExponential(2)}, largest gradient ${e.toExponential(2)} (${worst}); tolerance ${tol}; ` +
        `calls ${JSON.stringify(r.calls)}`);
      expect(r.errors.logits).toBeLessThan(tol);
      expect(r.errors.loss).toBeLessThan(tol);
      expect(r.errors['all gradients']).toBeLessThan(tol);
      for (const [name, err] of grads) expect(err, name).toBeLessThan(tol);
      // Every product ran through cuBLASLt, in the precision's compute mode.
      expect(r.calls.kernel).toBe(0);
      expect(r.calls.cublaslt).toBeGreaterThan(20);
      expect(r.calls.tf32).toBe(precision === 'tf32' ? r.calls.cublaslt : 0);
      expect(r.calls.bf16).toBe(precision === 'bf16' ? r.calls.cublaslt : 0);
    }
    // Reduced precision shows: the stand-in rounds the inputs, so tf32 and bf16 differ from fp32.
    expect(report.results.tf32.errors.logits).toBeGreaterThan(report.results.fp32.errors.logits);
    expect(report.results.bf16.errors.logits).toBeGreaterThan(report.results.tf32.errors.logits);
  }, 600_000);

  it("a 'bf16' model moves between 'cuda' and 'cpu' keeping its precision; on 'cuda' every precision is accepted", async () => {
    await useEmulator();
    const m = new ViTClassifier({ ...small, device: 'cuda', precision: 'bf16' });
    expect(precisions(m)).toEqual(['bf16']);
    m.to('cpu');
    expect(m.device).toBe('cpu');
    expect(m.parameters().every((p) => p.device === 'cpu')).toBe(true);
    expect(precisions(m)).toEqual(['bf16']);
    const c = new Linear({ inFeatures: 2, outFeatures: 2, device: 'cuda' }).setPrecision('bf16');
    expect(c.precision).toBe('bf16');
    c.dispose();
    m.dispose();
  }, 900_000);
});

