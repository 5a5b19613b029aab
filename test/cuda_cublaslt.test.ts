/**
 * CUDA matrix products through cuBLASLt or the backend's own kernel, on the SIMT emulator (the build
 * step is test/support/cuda_emu_build.ts's, which also builds the CPU stand-in for cuBLASLt,
 * build/cuda-emu/emulated/libnf_cublaslt_standin.so). The choice is made once per process, so each
 * case runs a child (test/support/cuda_gemm_child.ts) with the environment under test:
 *   - NF_CUBLASLT_PATH naming the stand-in: every product of a ViTClassifier training step goes
 *     through the cuBLASLt path (descriptors, layouts, fused epilogues, heuristic, workspace) and
 *     none through the kernel; with the default erf GELU (bias epilogue, then the elementwise GELU)
 *     and with the tanh GELU (GELU_AUX_BIAS forward, DGELU backward: cuBLASLt's own epilogues);
 *   - without it: ONE warning on stderr saying what to install, and the own kernel runs them all;
 * and in both the step (loss, logits, every gradient, every parameter after AdamW and after a second
 * trainStep) matches the same step on the CPU within 1e-4 relative (the largest is printed), and
 * cuda().backendInfo().gemm says which backend ran and how many products it took.
 * No GPU is involved: the real cuBLASLt is exercised only on a lent GPU (../shared/gpu/README.md).
 */
import path from 'node:path';

import { beforeAll, describe, expect, it } from 'vitest';

import type { CudaGemmInfo } from '../lib/index';
import { buildEmulated, cublasltStandIn as standIn, emuBuildDir, emulatorSkipReason, runEmulatedChild } from './support/cuda_emu_build';

const reason = emulatorSkipReason();
if (reason) console.log(`skipping the cuBLASLt stand-in tests: ${reason}`);

const TOL = 1e-4;

type Report = { info: { emulated: boolean; devices: number; gemm: CudaGemmInfo }; errors: Record<string, number> };

/** Runs test/support/cuda_gemm_child.ts with `env` and the GELUs to test. */
function child(env: Record<string, string>, activations: string[]): Promise<{ report: Report; stderr: string }> {
  return runEmulatedChild<Report>('cuda_gemm_child.ts', { NF_TEST_ACTIVATIONS: activations.join(','), ...env });
}

function expectClose(label: string, errors: Record<string, number>) {
  const entries = Object.entries(errors);
  expect(entries.length).toBeGreaterThan(40);
  const [worst, e] = entries.reduce((a, b) => (b[1] > a[1] ? b : a));
  console.log(`${label}: ${entries.length} outputs, largest relative error vs the CPU ${e.toExponential(2)} (${worst})`);
  for (const [name, err] of entries) expect(err, name).toBeLessThan(TOL);
}

const warnings = (stderr: string) => stderr.split('\n').filter((l) => /cuBLASLt/.test(l));

describe.skipIf(reason !== null)('CUDA matrix products: cuBLASLt (the CPU stand-in) or the own kernel', () => {
  beforeAll(async () => {
    const build = await buildEmulated();
    expect(build.ok, build.out).toBe(true);
  }, 900_000);

  it('with the stand-in, every product of a ViT training step runs through cuBLASLt, fused epilogues included, and matches the CPU', async () => {
    const { report, stderr } = await child({ NF_CUBLASLT_PATH: standIn }, ['gelu', 'gelu_tanh']);
    const g = report.info.gemm;
    console.log(`gemm backend: ${g.backend}${g.standIn ? ' (CPU stand-in)' : ''}, ${JSON.stringify(g.calls)}, workspace ${g.workspaceBytes} bytes`);
    expect(report.info.emulated).toBe(true);
    expect(g).toMatchObject({ backend: 'cublaslt', standIn: true, library: standIn, reason: null });
    expect(g.version).toBeGreaterThanOrEqual(120000);
    expect(g.workspaceBytes).toBeGreaterThan(0);
    expect(g.calls.kernel).toBe(0);
    expect(g.calls.cublaslt).toBeGreaterThan(50);
    expect(g.calls.fused).toBeGreaterThan(20); // bias, GELU_AUX_BIAS, DGELU, BGRADB
    expect(g.calls.heuristicQueries).toBeLessThan(g.calls.cublaslt); // algorithms are cached per shape
    expect(warnings(stderr)).toEqual([]);
    expectClose('cuBLASLt (stand-in)', report.errors);
  }, 600_000);

  it('without it, one warning says what to install, the own kernel runs every product, and the step matches the CPU', async () => {
    const { report, stderr } = await child({}, ['gelu', 'gelu_tanh']);
    const g = report.info.gemm;
    console.log(`gemm backend: ${g.backend} (${g.reason}), ${JSON.stringify(g.calls)}`);
    expect(g).toMatchObject({ backend: 'kernel', standIn: false, library: null, version: 0 });
    expect(g.reason).toMatch(/NF_CUBLASLT_PATH is not set/);
    expect(g.calls.cublaslt).toBe(0);
    expect(g.calls.kernel).toBeGreaterThan(50);
    const w = warnings(stderr);
    expect(w).toHaveLength(1);
    expect(w[0]).toMatch(/^nodeformer: cuBLASLt is not loaded .*own CUDA kernel.*CUDA toolkit.*pip install nvidia-cublas/);
    expectClose('own kernel', report.errors);
  }, 600_000);

  it('NF_CUBLASLT_PATH naming a missing file: the warning and backendInfo say why; NF_CUBLASLT=0: no warning', async () => {
    const missing = path.join(emuBuildDir, 'no-such-libcublasLt.so');
    const a = await child({ NF_CUBLASLT_PATH: missing }, []);
    expect(a.report.info.gemm.backend).toBe('kernel');
    expect(a.report.info.gemm.reason).toContain(missing);
    expect(warnings(a.stderr)).toHaveLength(1);
    expect(warnings(a.stderr)[0]).toContain(missing);
    const b = await child({ NF_CUBLASLT: '0', NF_CUBLASLT_PATH: standIn }, []);
    expect(b.report.info.gemm).toMatchObject({ backend: 'kernel', reason: 'disabled by NF_CUBLASLT=0' });
    expect(warnings(b.stderr)).toEqual([]);
  }, 120_000);
});
