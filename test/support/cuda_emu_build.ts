/**
 * The one build step of the CUDA emulator tests (test/cuda_emulator.test.ts, test/cuda_device.test.ts):
 * configures build/cuda-emu with the host compiler only (-DNF_CUDA=OFF, no nvcc) and builds both
 * emulated targets together — nf_cuda_emu_tests (the C++ parity suite) and nodeformer_cuda_emu (the
 * CUDA addon over the SIMT emulator, build/cuda-emu/emulated/nodeformer_cuda.node, what
 * NF_CUDA_BACKEND=emulator loads), with the CPU stand-in for cuBLASLt both depend on
 * (build/cuda-emu/emulated/libnf_cublaslt_standin.so, what NF_CUBLASLT_PATH names in the tests) —
 * so whichever test file runs first compiles the shared kernel library once and the others find
 * everything up to date.
 */
import { spawn, spawnSync } from 'node:child_process';
import path from 'node:path';

export const root = path.resolve(__dirname, '..', '..');
export const emuBuildDir = path.join(root, 'build', 'cuda-emu');

export type Result = { ok: boolean; out: string };

// Runs a command without blocking the event loop (a long synchronous build would starve vitest's
// worker of its heartbeat).
export function run(cmd: string, args: string[], env: NodeJS.ProcessEnv = process.env): Promise<Result> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd: root, env });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.on('error', (e) => resolve({ ok: false, out: `${out}${e.message}` }));
    child.on('close', (code) => resolve({ ok: code === 0, out }));
  });
}

/** Why the emulator tests cannot run here, or null. */
export function emulatorSkipReason(): string | null {
  if (process.platform !== 'linux') return `the SIMT emulator runs on Linux only (this is ${process.platform})`;
  const cmake = spawnSync('cmake', ['--version']);
  if (cmake.error || cmake.status !== 0) return 'cmake is not installed';
  return null;
}

/** Configures and builds both emulated targets; the build log (to check for warnings) or a failure. */
export async function buildEmulated(): Promise<Result> {
  const configure = await run('cmake', ['-S', root, '-B', emuBuildDir, '-DNF_CUDA=OFF', '-DCMAKE_BUILD_TYPE=Release']);
  if (!configure.ok) return configure;
  return run('cmake', ['--build', emuBuildDir, '--target', 'nf_cuda_emu_tests', 'nodeformer_cuda_emu', '-j', '2']);
}

/**
 * Builds the emulator and selects it (NF_CUDA_BACKEND=emulator): what a test file's beforeAll
 * runs before putting models on 'cuda'. Throws with the build log when the build fails.
 */
export async function useEmulator(): Promise<void> {
  const build = await buildEmulated();
  if (!build.ok) throw new Error(`the emulator build failed:\n${build.out}`);
  process.env.NF_CUDA_BACKEND = 'emulator';
}
