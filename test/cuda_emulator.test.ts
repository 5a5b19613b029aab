/**
 * The CUDA backend without a GPU: builds native/cuda's kernels as plain C++ against the SIMT
 * emulator (CMake target nf_cuda_emu_tests, host compiler only, no nvcc) and runs the emulator's
 * own tests and the parity tests of every CUDA kernel against the float64 references (relative
 * error < 1e-5 forward, < 1e-4 gradients), including the proof that removing any __syncthreads
 * makes a test fail. Skipped, with the reason printed, where cmake is missing or the platform is
 * not Linux (the emulator switches fibers on x86-64/ucontext and poisons an ELF section).
 */
import { spawn, spawnSync } from 'node:child_process';
import path from 'node:path';

import { describe, expect, it } from 'vitest';

const root = path.resolve(__dirname, '..');
const buildDir = path.join(root, 'build', 'cuda-emu');
const exe = path.join(buildDir, 'nf_cuda_emu_tests');

type Result = { ok: boolean; out: string };

// Runs a command without blocking the event loop (a long synchronous build would starve vitest's
// worker of its heartbeat).
function run(cmd: string, args: string[]): Promise<Result> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd: root });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.on('error', (e) => resolve({ ok: false, out: `${out}${e.message}` }));
    child.on('close', (code) => resolve({ ok: code === 0, out }));
  });
}

function skipReason(): string | null {
  if (process.platform !== 'linux') return `the SIMT emulator runs on Linux only (this is ${process.platform})`;
  const cmake = spawnSync('cmake', ['--version']);
  if (cmake.error || cmake.status !== 0) return 'cmake is not installed';
  return null;
}

const reason = skipReason();
if (reason) console.log(`skipping the CUDA emulator tests: ${reason}`);

describe.skipIf(reason !== null)('CUDA backend on the SIMT emulator', () => {
  it('builds nf_cuda_emu_tests and passes the emulator and parity tests', async () => {
    const configure = await run('cmake', ['-S', root, '-B', buildDir, '-DNF_CUDA=OFF', '-DCMAKE_BUILD_TYPE=Release']);
    expect(configure.ok, configure.out).toBe(true);
    const build = await run('cmake', ['--build', buildDir, '--target', 'nf_cuda_emu_tests', '-j', '2']);
    expect(build.ok, build.out).toBe(true);
    expect(build.out).not.toMatch(/warning:/);
    const tests = await run(exe, []);
    // The executable prints a line per test, the largest relative errors per output, a summary.
    console.log(tests.out);
    expect(tests.ok, tests.out).toBe(true);
    expect(tests.out).toMatch(/ 0 failed/);
  }, 900_000);
});
