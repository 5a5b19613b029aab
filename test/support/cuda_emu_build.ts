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
/** The emulated CUDA addon (what NF_CUDA_BACKEND=emulator loads) and nodeformer's CPU stand-in for cuBLASLt, both built by buildEmulated. */
export const emulatedAddon = path.join(emuBuildDir, 'emulated', 'nodeformer_cuda.node');
export const cublasltStandIn = path.join(emuBuildDir, 'emulated', 'libnf_cublaslt_standin.so');

/**
 * Runs test/support/<script> (through tsx) in a child process on the emulated addon, with `env` over
 * this process's environment less its NF_CUBLASLT* settings (a child chooses its GEMM backend once);
 * resolves to the child's last line of output parsed as JSON, and its stderr; rejects when it fails.
 */
export function runEmulatedChild<T>(script: string, env: Record<string, string>): Promise<{ report: T; stderr: string }> {
  const base = { ...process.env };
  for (const name of ['NF_CUBLASLT_PATH', 'NF_CUBLASLT', 'NF_CUBLASLT_STANDIN_REFUSE']) delete base[name];
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, ['--import', 'tsx', path.join('test', 'support', script)], {
      cwd: root, env: { ...base, NF_CUDA_BACKEND: emulatedAddon, ...env },
    });
    let stdout = '', stderr = '';
    p.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    p.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    p.on('error', reject);
    p.on('close', (code) => {
      if (code !== 0) return reject(new Error(`child exited with ${code}:\n${stderr}\n${stdout}`));
      resolve({ report: JSON.parse(stdout.trim().split('\n').at(-1)!) as T, stderr });
    });
  });
}

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

/**
 * Why the emulator tests cannot run here, or null. NF_CUDA_EMU_SKIP=<reason> skips them (the arm64
 * tests under qemu set it: this machine's compiler builds the emulator for another architecture).
 */
export function emulatorSkipReason(): string | null {
  if (process.env.NF_CUDA_EMU_SKIP) return process.env.NF_CUDA_EMU_SKIP;
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
