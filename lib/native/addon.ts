/**
 * Loads the compiled addon and declares its raw interface, so the façade is type-checked against
 * what the addon exports. Resolution: NF_ADDON_PATH (an explicit .node file) if set, else the
 * platform package for this os/cpu/libc (@nodeformer/linux-x64-gnu, ...: lib/native/platform.ts),
 * then a local build (build/Release, build/Debug, build-cmake: a clone after `npm run
 * build:native`). When none loads, the error (ERR_NF_LOAD) lists every binary tried and why each
 * failed, and says how to get one.
 *
 * One binary serves every x86-64 CPU: the kernels are compiled for scalar, AVX2 and AVX-512 into
 * separate namespaces and chosen at run time by CPUID (native/cpu/isa.h, native/core/cpu_features.h),
 * so a binary built on an AVX-512 machine never executes AVX-512 code on a CPU without it. An arm64
 * binary holds scalar and NEON kernels, chosen the same way (NEON is on every AArch64 CPU).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

import { NodeformerError } from '../validation/errors';

import { CPU_ADDON, currentKey, currentPlatform, packageName, resolvePlatformFile } from './platform';

import type { CoreOps } from './core';
import type { NativeOps } from './ops.generated';
import type { SimdProbeOps } from './simd_probe';

/**
 * Every op `name` also exists as `nameAsync`: the same validation on the calling thread, the work
 * on a worker thread, a Promise that settles when it is done (the arrays must stay untouched
 * until then).
 */
export type WithAsync<T> = T & {
  [K in keyof T as `${string & K}Async`]: T[K] extends (a: infer A) => void ? (a: A) => Promise<void> : never;
};

/** What an addon says about its ops: the JSON of their schema (native/ops/recorder.h). */
export interface OpSchemaExport {
  /** The ops this addon runs, each with its fields (name, kind, role, dtype, shape, ...), as JSON. */
  opSchema(): string;
}

/**
 * The raw binding: every op takes one options object of typed arrays and dims. The ops' interface,
 * NativeOps, is generated from the addon's op schema (lib/native/ops.generated.ts, written by
 * scripts/gen_native_types.js from native/ops/*.h).
 */
export type NativeBinding = CoreOps & SimdProbeOps & OpSchemaExport & WithAsync<NativeOps>;

/** The folder of nodeformer's package.json at or above `start`. */
export function packageRoot(start: string): string {
  let dir = start;
  for (;;) {
    const pkg = path.join(dir, 'package.json');
    if (fs.existsSync(pkg) && JSON.parse(fs.readFileSync(pkg, 'utf8')).name === 'nodeformer') return dir;
    const up = path.dirname(dir);
    if (up === dir) throw new NodeformerError('ERR_NF_LOAD', `nodeformer: cannot find the package root above ${start}`);
    dir = up;
  }
}

/**
 * The binaries to try, in order: the platform package's, then the local builds that exist — so
 * that a binary that exists but cannot be loaded (another architecture, a corrupt download) does
 * not hide one that would. What was looked for and not found goes into `tried` with the reason.
 */
function candidates(root: string, tried: string[]): string[] {
  const found: string[] = [];
  const platform = currentPlatform();
  if (!platform) tried.push(`no @nodeformer package is made for ${currentKey()}`);
  else {
    const r = resolvePlatformFile(platform, CPU_ADDON);
    if ('file' in r) found.push(r.file);
    else tried.push(r.missing);
  }
  for (const p of [path.join(root, 'build', 'Release', CPU_ADDON), path.join(root, 'build', 'Debug', CPU_ADDON), path.join(root, 'build-cmake', CPU_ADDON)]) {
    if (fs.existsSync(p)) found.push(p);
    else tried.push(`${p}: not found`);
  }
  return found;
}

/** What ERR_NF_LOAD advises when no binary loaded (NF_ADDON_PATH unset). */
function advice(): string[] {
  const platform = currentPlatform();
  const get = platform
    ? [`The prebuilt addon for this machine is the optional package ${packageName(platform)}, which \`npm install nodeformer\` ` +
        'installs with it (no install script runs, so npm\'s allowScripts and --strict-allow-scripts, pnpm\'s and Bun\'s ' +
        'blocked scripts do not matter). It is missing when optional dependencies were left out (--omit=optional, ' +
        '--no-optional) or node_modules was installed on another platform and copied: reinstall with ' +
        '`npm install --include=optional`, or add it: `npm install ' + `${packageName(platform)}@${nodeformerVersion()}\`.`]
    : [`No prebuilt addon is published for ${currentKey()}.`];
  return [...get,
    'To build it from source (a C++17 compiler, make and Python 3): in a clone of the nodeformer repository, ' +
      '`npm install && npm run build:native`, then point NF_ADDON_PATH at its build/Release/nodeformer.node.'];
}

/** nodeformer's version, from its package.json ('latest' when there is none): its platform packages are the same version. */
export function nodeformerVersion(): string {
  try {
    return (JSON.parse(fs.readFileSync(path.join(packageRoot(__dirname), 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return 'latest';
  }
}

/** require()s one candidate; returns the addon, or records why it could not be used. */
function attempt(file: string, tried: string[]): NativeBinding | null {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const addon = require(file) as Partial<NativeBinding>;
    if (typeof addon.isaInfo === 'function') return addon as NativeBinding;
    tried.push(`${file}: loaded, but it is not a nodeformer addon (it has no isaInfo)`);
  } catch (e) {
    tried.push(`${file}: ${(e as Error).message.trim().replace(/\s*\n\s*/g, '; ')}`);
  }
  return null;
}

function load(): { addon: NativeBinding; file: string } {
  const tried: string[] = [];
  const explicit = process.env.NF_ADDON_PATH;
  const files = explicit ? [path.resolve(explicit)] : candidates(packageRoot(__dirname), tried);
  for (const file of files) {
    const addon = attempt(file, tried);
    if (addon) return { addon, file };
  }
  throw new NodeformerError('ERR_NF_LOAD', [
    `nodeformer: no usable native addon for ${currentKey()}, Node ${process.versions.node} ` +
      `(N-API ${process.versions.napi}). Tried${explicit ? ' NF_ADDON_PATH' : ''}:`,
    ...tried.map((t) => `  - ${t}`),
    ...(explicit ? ['Unset NF_ADDON_PATH to use the packaged binaries, or point it at a nodeformer .node file.'] : advice()),
  ].join('\n'));
}

/**
 * Warns once per process (process.emitWarning, code NF_ISA_REJECTED) when the load-time self-check
 * rejected a kernel variant, naming it, the reason and the variant used instead.
 */
function warnRejected(addon: NativeBinding): void {
  if (!addon.claimSelfCheckWarning()) return;
  const info = addon.isaInfo();
  const list = info.rejected.map((r) => `${r.isa} (${r.reason})`).join('; ');
  process.emitWarning(
    `nodeformer: the CPU kernel variant${info.rejected.length > 1 ? 's' : ''} ${list} failed the load-time ` +
      `self-check against the scalar variant and will not be used; running ${info.active} instead.`,
    { code: 'NF_ISA_REJECTED' },
  );
}

const loaded = load();
warnRejected(loaded.addon);
/** The loaded addon. */
export const native: NativeBinding = loaded.addon;
/** The .node file it was loaded from. */
export const nativeAddonPath: string = loaded.file;
