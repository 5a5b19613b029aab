/**
 * Packing nodeformer's npm packages, for `npm run pack:all` (scripts/pack_all.ts) and for
 * test/package.test.ts, which installs them:
 *   - the main package, `nodeformer`: dist/ and the README, its package.json without scripts (so
 *     installing it runs none) and with the platform packages as optionalDependencies at its own
 *     version (the repository's package.json lists none: until they are published, a clone's
 *     `npm install` would look them up on the registry);
 *   - a platform package, `@nodeformer/<key>` (lib/native/platform.ts): the addons built for it, a
 *     README, and a package.json whose os, cpu and libc fields let npm, pnpm and Bun install only
 *     the one that fits the machine.
 * Each is staged in a folder and packed by `npm pack`, so the tarball is exactly what npm publishes.
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

import { packageName, type PlatformPackage } from '../lib/native/platform';

export const repoRoot = path.resolve(__dirname, '..');

/** One packed tarball: where it is, and what `npm pack` said of it. */
export interface Packed {
  name: string;
  file: string;
  /** The tarball's size and the unpacked size, in bytes. */
  size: number;
  unpackedSize: number;
  files: string[];
}

/** `npm pack` of a staged folder into `dest`. `npm` is the command's argv prefix. */
function npmPack(npm: string[], dir: string, dest: string): Packed {
  fs.mkdirSync(dest, { recursive: true });
  const out = execFileSync(npm[0], [...npm.slice(1), 'pack', '--json', '--pack-destination', dest], { cwd: dir, encoding: 'utf8' });
  const r = (JSON.parse(out.slice(out.indexOf('[\n'))) as { name: string; filename: string; size: number; unpackedSize: number; files: { path: string }[] }[])[0];
  return { name: r.name, file: path.join(dest, r.filename), size: r.size, unpackedSize: r.unpackedSize, files: r.files.map((f) => f.path) };
}

/** The repository's package.json. */
export function ownManifest(): Record<string, unknown> & { version: string; files: string[] } {
  return JSON.parse(fs.readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as Record<string, unknown> & { version: string; files: string[] };
}

/**
 * Packs the main package from the repository's dist/ (built beforehand: npm run build:ts) into
 * `dest`, listing `platforms` (the platform packages packed with it) as optionalDependencies.
 */
export function packMain(npm: string[], stage: string, dest: string, platforms: readonly PlatformPackage[]): Packed {
  const own = ownManifest();
  if (!fs.existsSync(path.join(repoRoot, 'dist', 'cjs', 'index.js'))) throw new Error('no dist/: run npm run build:ts first');
  const dir = path.join(stage, 'nodeformer');
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  for (const f of own.files) fs.cpSync(path.join(repoRoot, f), path.join(dir, f), { recursive: true });
  const { scripts: _scripts, ...manifest } = own;
  manifest.optionalDependencies = Object.fromEntries(platforms.map((p) => [packageName(p), own.version]));
  fs.writeFileSync(path.join(dir, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  return npmPack(npm, dir, dest);
}

/** What a platform package says of itself. */
function describe(p: PlatformPackage): string {
  const libc = p.libc ? ` (${p.libc})` : '';
  return p.files.some((f) => f.includes('cuda'))
    ? `nodeformer's CUDA backend for ${p.os}-${p.cpu}${libc}: the nvcc-built addon (sm_80/89/90 + PTX, CUDA runtime linked statically)`
    : `nodeformer's prebuilt addon for ${p.os}-${p.cpu}${libc}`;
}

/**
 * Packs platform package `p` from the addon files in `built` (those of p.files that exist there)
 * into `dest`, at `version`. Throws when the CPU or CUDA addon itself is missing.
 */
export function packPlatform(npm: string[], p: PlatformPackage, built: string, stage: string, dest: string, version: string): Packed {
  const files = p.files.filter((f) => fs.existsSync(path.join(built, f)));
  if (!files.includes(p.files[0])) throw new Error(`${packageName(p)}: no ${p.files[0]} in ${built}`);
  const dir = path.join(stage, p.key);
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  for (const f of files) fs.copyFileSync(path.join(built, f), path.join(dir, f));
  const own = ownManifest();
  const manifest = {
    name: packageName(p), version, description: describe(p), license: own.license,
    os: [p.os], cpu: [p.cpu], ...(p.libc ? { libc: [p.libc] } : {}),
    files: [...files, 'README.md'],
  };
  fs.writeFileSync(path.join(dir, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  const cuda = p.files.some((f) => f.includes('cuda'));
  fs.writeFileSync(path.join(dir, 'README.md'), `# ${packageName(p)}\n\n${describe(p)}.\n\n` + (cuda
    ? `Install it beside nodeformer (\`npm install ${packageName(p)}@${version}\`) and \`device: 'cuda'\` uses it; it needs the NVIDIA driver, not a CUDA toolkit.\n`
    : `\`npm install nodeformer\` installs it on ${p.os}-${p.cpu}${p.libc ? ` with ${p.libc}` : ''} as an optional dependency; nothing is compiled and no install script runs.\n`) +
    `\nFiles: ${files.join(', ')}.\n`);
  return npmPack(npm, dir, dest);
}
