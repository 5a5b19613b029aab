/**
 * linux-x64-musl, run on this glibc machine: the @nodeformer/linux-x64-musl tarball of
 * `npm run pack:all` (release/; build:platforms cross-builds it with zig, the C++ runtime linked in
 * statically) and the main package, installed by `bun add` (from a local registry) and run by Bun for musl
 * (@oven/bun-linux-x64-musl, an Alpine build) on Debian's musl loader (/lib/ld-musl-x86_64.so.1,
 * `apt-get install musl`), with the libstdc++.so.6 that Bun itself needs built by
 * scripts/musl_libstdcxx.sh (the addon needs none: it links only musl's libc). Both tools come from
 * scripts/install_runtimes.sh, which .ci/run runs.
 *
 * `require('nodeformer')` must find the musl package by itself (detect-libc sees Bun's musl loader),
 * the addon pass its load-time self-check on every kernel variant this CPU runs, and the README's
 * quick example compute, with each variant (NF_ISA), what Node with the glibc addon computes here
 * (to 1e-5 of the largest logit: musl's expf and logf round differently from glibc's). Then the op
 * parity suite (test/ops_parity.test.ts: every op, forward and backward, every variant, against the
 * float64 reference) runs in vitest under Bun for musl with the installed addon. Skips, saying why,
 * without Debian's musl, Bun for musl, its libstdc++.so.6 or the tarballs.
 */
import { execFile, execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { IsaInfo } from '../lib/native/core';
import { repoRoot } from './support/bundle';
import { fetchPackage } from './support/fetch_package';
import { quickExample } from './support/quick_example';
import { ownManifest } from '../scripts/packaging';
import { type Registry, serveRegistry } from './support/registry';
import { releaseMissing, releaseTarballs } from './support/release';
import { bunMuslLibs, runtime, runtimesDir } from './support/runtimes';

const loader = '/lib/ld-musl-x86_64.so.1';
const bun = runtime('bunMusl');
const missing = [!fs.existsSync(loader) && `${loader} (Debian: apt-get install musl)`,
  !bun && 'Bun for musl (scripts/install_runtimes.sh)',
  !fs.existsSync(path.join(bunMuslLibs, 'libstdc++.so.6')) && `${bunMuslLibs}/libstdc++.so.6 (scripts/install_runtimes.sh runs scripts/musl_libstdcxx.sh)`,
  releaseMissing('linux-x64-musl')].filter(Boolean);
if (missing.length) console.log(`linux-x64-musl under Bun for musl: skipped, missing ${missing.join(', ')}`);

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nf-musl-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** What the package loaded, and the quick example's logits. */
const probe = `const nf = require('nodeformer');
const info = nf.native.isaInfo();
const { familySync } = require('detect-libc');
process.stdout.write(JSON.stringify({ libc: familySync(), addon: nf.nativeAddonPath, info }) + '\\n');
`;

function close(a: number[], b: number[]): void {
  expect(a.length).toBe(b.length);
  const scale = Math.max(1, ...b.map(Math.abs));
  a.forEach((v, i) => expect(Math.abs(v - b[i])).toBeLessThanOrEqual(1e-5 * scale));
}

describe.skipIf(missing.length > 0)('@nodeformer/linux-x64-musl in Bun for musl', () => {
  const run = promisify(execFile);
  /** Bun for musl running `args` in `cwd`; its stdout. */
  const bunMusl = async (args: string[], env: NodeJS.ProcessEnv = {}, cwd = dir, timeout = 120_000): Promise<string> =>
    (await run(bun!, args, { cwd, encoding: 'utf8', timeout, maxBuffer: 1 << 26,
      env: { ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('VITEST'))), LD_LIBRARY_PATH: bunMuslLibs, NF_ADDON_PATH: '', ...env } })).stdout;
  const lastJson = <T>(out: string): T => JSON.parse(out.trim().split('\n').at(-1)!) as T;
  let pkg = '';
  let registry: Registry | undefined;
  afterAll(async () => registry?.close());

  beforeAll(async () => {
    // Bun for musl installs nodeformer from the tarballs (a local registry, as test/package.test.ts
    // serves them, with an empty cache) and picks the musl package by its libc field.
    const { main, platform } = releaseTarballs('linux-x64-musl');
    registry = await serveRegistry([main, platform]);
    fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'nf-musl-app', private: true }));
    const t0 = Date.now();
    await bunMusl(['add', `nodeformer@${ownManifest().version}`, '--registry', registry.url], { BUN_INSTALL_CACHE_DIR: path.join(dir, '.bun-cache') });
    const seconds = (Date.now() - t0) / 1000;
    pkg = path.join(dir, 'node_modules', '@nodeformer', 'linux-x64-musl');
    const installed = fs.readdirSync(path.join(dir, 'node_modules'), { recursive: true, withFileTypes: true }).filter((e) => e.isFile())
      .reduce((n, e) => n + fs.statSync(path.join(e.parentPath, e.name)).size, 0);
    console.log(`bun add nodeformer (Bun for musl, from release/): ${seconds.toFixed(1)} s, node_modules ${(installed / 2 ** 20).toFixed(1)} MiB: ` +
      fs.readdirSync(path.join(dir, 'node_modules', '@nodeformer')).join(', '));
    expect(seconds).toBeLessThan(20);
    expect(fs.readdirSync(path.join(dir, 'node_modules', '@nodeformer'))).toEqual(['linux-x64-musl']);
    fs.writeFileSync(path.join(dir, 'probe.cjs'), probe);
    fs.writeFileSync(path.join(dir, 'quick.cjs'), quickExample);
    fs.writeFileSync(path.join(dir, 'quick-glibc.cjs'), quickExample.replace("require('nodeformer')", `require(${JSON.stringify(repoRoot)})`));
    execFileSync(process.execPath, [path.join(repoRoot, 'scripts', 'ensure-built.js')], { cwd: repoRoot, stdio: 'inherit' });
  }, 600_000);

  it('loads the package (found by its libc), passes the self-check, and computes the quick example as glibc Node does, on each kernel variant', async () => {
    const r = lastJson<{ libc: string; addon: string; info: IsaInfo }>(await bunMusl(['probe.cjs']));
    expect(r.libc).toBe('musl');
    expect(r.addon).toBe(fs.realpathSync(path.join(pkg, 'nodeformer.node')));
    expect(r.info.rejected).toEqual([]);
    expect(r.info.selfCheck.checked.map((c) => c.isa).sort()).toEqual(r.info.available.filter((i) => i !== 'scalar').sort());
    const version = (await bunMusl(['--version'])).trim();
    for (const isa of r.info.available) {
      const musl = lastJson<{ logits: number[] }>(await bunMusl(['quick.cjs'], { NF_ISA: isa }));
      const glibc = lastJson<{ logits: number[] }>((await run(process.execPath, [path.join(dir, 'quick-glibc.cjs')],
        { cwd: dir, encoding: 'utf8', env: { ...process.env, NF_ISA: isa } })).stdout);
      expect(musl.logits).toHaveLength(80);
      close(musl.logits, glibc.logits);
    }
    console.log(`linux-x64-musl in Bun ${version} for musl (${loader}): ${r.addon}; self-check ${JSON.stringify(r.info.selfCheck.checked)}; ` +
      `the quick example matches glibc Node ${process.versions.node} on ${r.info.available.join(', ')}`);
  }, 600_000);

  it('passes the op parity suite (vitest in Bun for musl, the installed addon)', async () => {
    // vitest's bundler, rollup, needs its musl binding there, fetched like the other test-only tools.
    const rollup = (JSON.parse(fs.readFileSync(require.resolve('rollup/package.json'), 'utf8')) as { version: string }).version;
    const nodePath = path.join(runtimesDir, 'musl', `rollup-${rollup}`);
    fetchPackage(`@rollup/rollup-linux-x64-musl@${rollup}`, path.join(nodePath, '@rollup', 'rollup-linux-x64-musl'), 'package.json');
    const out = path.join(dir, 'report.json');
    const t0 = Date.now();
    let log = '';
    try {
      log = await bunMusl([path.join(repoRoot, 'node_modules/vitest/vitest.mjs'), 'run', '--pool=threads', '--reporter=json', `--outputFile.json=${out}`,
        'test/ops_parity.test.ts'], { NF_ADDON_PATH: path.join(pkg, 'nodeformer.node'), NODE_PATH: nodePath,
        NF_CUDA_EMU_SKIP: 'the suite runs in Bun for musl; the emulator build is for glibc' }, repoRoot, 900_000);
    } catch (e) {
      log = `${(e as { stdout?: string }).stdout ?? ''}${(e as { stderr?: string }).stderr ?? ''}${(e as Error).message}`;
    }
    expect(fs.existsSync(out), `vitest under Bun for musl wrote no report:\n${log.slice(-4000)}`).toBe(true);
    const report = JSON.parse(fs.readFileSync(out, 'utf8')) as { numPassedTests: number; numFailedTests: number; numPendingTests: number;
      testResults: { assertionResults: { fullName: string; status: string; failureMessages: string[] }[] }[] };
    const failures = report.testResults.flatMap((f) => f.assertionResults.filter((a) => a.status === 'failed')
      .map((a) => `${a.fullName}: ${a.failureMessages[0]?.split('\n')[0]}`));
    console.log(`op parity under Bun for musl: ${report.numPassedTests} passed, ${report.numFailedTests} failed, ` +
      `${report.numPendingTests} skipped in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
    expect(failures).toEqual([]);
    expect(report.numPassedTests).toBeGreaterThan(10);
  }, 1_000_000);
});
