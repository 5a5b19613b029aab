/**
 * The CUDA backend without a GPU: builds native/cuda's kernels as plain C++ against the SIMT
 * emulator (CMake target nf_cuda_emu_tests, host compiler only, no nvcc; the build step is shared
 * with test/cuda_device.test.ts: test/support/cuda_emu_build.ts) and runs the emulator's
 * own tests and the parity tests of every CUDA kernel against the float64 references (relative
 * error < 1e-5 forward, < 1e-4 gradients), including the proof that removing any __syncthreads
 * makes a test fail. Skipped, with the reason printed, where cmake is missing or the platform is
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
    const tests = await run(exe, []);
    // The executable prints a line per test, the largest relative errors per output, a summary.
    console.log(tests.out);
    expect(tests.ok, tests.out).toBe(true);
    expect(tests.out).toMatch(/ 0 failed/);
  }, 900_000);
});
