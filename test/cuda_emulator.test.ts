/**
 * The CUDA backend without a GPU: builds native/cuda's kernels as plain C++ against the SIMT
 * emulator (CMake target nf_cuda_emu_tests, host compiler only, no nvcc; the build step is shared
 * with test/cuda_device.test.ts: test/support/cuda_emu_build.ts) and runs the emulator's
 * own tests and the parity tests of every CUDA kernel against the float64 references (relative
 * error < 1e-5 forward, < 1e-4 gradients), including the proof that removing any __syncthreads
 * makes a test fail; twice: with the products on the backend's own GEMM kernel (no cuBLASLt, after
 * one warning), and through cuBLASLt's path with its CPU stand-in (NF_CUBLASLT_PATH). Skipped, with the reason printed, where cmake is missing or the platform is
 * not Linux (the emulator switches fibers on x86-64/ucontext and poisons an ELF section).
 */
import path from 'node:path';

import { describe, expect, it } from 'vitest';

import { buildEmulated, emuBuildDir, emulatorSkipReason, run } from './support/cuda_emu_build';

const exe = path.join(emuBuildDir, 'nf_cuda_emu_tests');

const reason = emulatorSkipReason();
if (reason) console.log(`skipping the CUDA emulator tests: ${reason}`);

describe.skipIf(reason !== null)('CUDA backend on the SIMT emulator', () => {
  it('builds nf_cuda_emu_tests (with the emulated addon) and passes the emulator and parity tests', async () => {
    const build = await buildEmulated();
    expect(build.ok, build.out).toBe(true);
    expect(build.out).not.toMatch(/warning:/);
    // Twice, at the same time (one process per core): the products on the backend's own kernel (no
    // cuBLASLt: one warning), and through cuBLASLt's path with the CPU stand-in (the kernel still
    // checked on the GEMM cases).
    const env = { ...process.env };
    delete env.NF_CUBLASLT_PATH;
    delete env.NF_CUBLASLT;
    const standIns = [false, true];
    const runs = await Promise.all(standIns.map((standIn) =>
      run(exe, [], standIn ? { ...env, NF_CUBLASLT_PATH: path.join(emuBuildDir, 'emulated', 'libnf_cublaslt_standin.so') } : env)));
    for (const [i, tests] of runs.entries()) {
      const standIn = standIns[i];
      // The executable prints a line per test, the largest relative errors per output, a summary.
      console.log(tests.out);
      expect(tests.ok, tests.out).toBe(true);
      expect(tests.out).toMatch(/ 0 failed/);
      expect(tests.out).toMatch(standIn ? /gemm backend: cublaslt \(CPU stand-in\)/ : /gemm backend: kernel/);
      expect(tests.out.split('\n').filter((l) => /^nodeformer: cuBLASLt is not loaded/.test(l))).toHaveLength(standIn ? 0 : 1);
    }
  }, 900_000);
});
