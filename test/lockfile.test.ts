/**
 * package-lock.json must stay one that `npm ci` accepts on a fresh clone. npm leaves out of the
 * lockfile an optional dependency whose metadata it could not fetch when it wrote the file (the
 * registry reachable here lacks most of @rollup/rollup-<platform>@4.68.7), and `npm install` never
 * puts it back, but `npm ci` refuses such a lockfile ("Missing: @rollup/rollup-android-arm-eabi@
 * from lock file"). The 24 @rollup/rollup-<platform> entries for the other platforms were added by
 * hand (version of rollup, os/cpu/libc of the packages; no integrity, which only their tarballs
 * give); npm keeps them as they are (`npm install --package-lock-only` leaves the file identical).
 *
 * Both checks are offline and read no cache: a walk of the lockfile, and `npm ci --dry-run
 * --offline` on a copy of package.json and package-lock.json with an empty cache, which validates
 * the lockfile against package.json without fetching anything, and says nothing npm warns about
 * (a project .npmrc with a key npm does not know made every npm command warn; onnxruntime-node's
 * download of CUDA libraries is now turned off by package.json's allowScripts instead). (.ci/run runs the same
 * `npm ci --dry-run` on the committed files before its `npm install`, which could rewrite them.)
 */
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { afterAll, describe, expect, it } from 'vitest';

const root = path.resolve(__dirname, '..');
const npmCli = [path.join(path.dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'bin', 'npm-cli.js'),
  path.join(path.dirname(fs.realpathSync(process.execPath)), '..', 'lib', 'node_modules', 'npm', 'bin', 'npm-cli.js')]
  .find((p) => fs.existsSync(p));
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'nf-lock-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

interface LockEntry {
  version?: string;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
  link?: boolean;
}

describe('package-lock.json', () => {
  const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as LockEntry;
  const lock = JSON.parse(fs.readFileSync(path.join(root, 'package-lock.json'), 'utf8')) as { lockfileVersion: number; packages: Record<string, LockEntry> };

  it('lists every dependency of every package, optional ones for other platforms included', () => {
    expect(lock.lockfileVersion).toBe(3);
    const packages = lock.packages;
    for (const kind of ['dependencies', 'optionalDependencies', 'devDependencies'] as const)
      expect(packages[''][kind] ?? {}, `root ${kind} as in package.json`).toEqual(pkg[kind] ?? {});
    /** Where Node (and npm) would find `name` from the package at `from`: its own node_modules, then its parents'. */
    const resolve = (from: string, name: string): string | undefined => {
      for (let at = from; ; ) {
        const candidate = `${at ? `${at}/` : ''}node_modules/${name}`;
        if (packages[candidate]) return candidate;
        if (!at) return undefined;
        const up = at.lastIndexOf('/node_modules/');
        at = up < 0 ? '' : at.slice(0, up);
      }
    };
    const missing: string[] = [];
    for (const [where, entry] of Object.entries(packages)) {
      if (entry.link) continue;
      const wanted = [...Object.keys(entry.dependencies ?? {}), ...Object.keys(entry.optionalDependencies ?? {}),
        ...(where === '' ? Object.keys(entry.devDependencies ?? {}) : []),
        ...Object.keys(entry.peerDependencies ?? {}).filter((n) => !entry.peerDependenciesMeta?.[n]?.optional)];
      for (const name of wanted) if (!resolve(where, name)) missing.push(`${where || '(root)'} needs ${name}`);
    }
    expect(missing, 'packages the lockfile lacks (npm ci refuses it)').toEqual([]);
  });

  it.runIf(npmCli)('is accepted by npm ci (dry run, offline, empty cache)', async () => {
    for (const f of ['package.json', 'package-lock.json']) fs.copyFileSync(path.join(root, f), path.join(tmp, f));
    const [userrc, globalrc] = [path.join(tmp, 'user-npmrc'), path.join(tmp, 'global-npmrc')];
    for (const f of [userrc, globalrc]) fs.writeFileSync(f, '');
    const env = { PATH: process.env.PATH, HOME: tmp, npm_config_cache: path.join(tmp, 'cache'), npm_config_userconfig: userrc, npm_config_globalconfig: globalrc };
    const out = await new Promise<string>((resolve) => {
      execFile(process.execPath, [npmCli!, 'ci', '--dry-run', '--offline', '--ignore-scripts', '--no-audit', '--no-fund'], { cwd: tmp, env, encoding: 'utf8', maxBuffer: 1 << 24 },
        (err, stdout, stderr) => resolve(`${err ? `exit ${err.code}\n` : ''}${stdout}${stderr}`));
    });
    const errors = out.split('\n').filter((l) => /^exit |npm error (code|`npm ci`|Missing|Invalid)/.test(l)).slice(0, 12);
    expect(errors, 'npm ci --dry-run').toEqual([]);
    expect(out).toMatch(/added \d+ packages/);
    expect(out.split('\n').filter((l) => l.startsWith('npm warn')), 'npm warnings').toEqual([]);
  });
});
