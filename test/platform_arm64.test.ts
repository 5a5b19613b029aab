/**
 * linux-arm64: the @nodeformer/linux-arm64-gnu package as users get it — its release tarball and the
 * main package's (`npm run pack:all`; `npm run build:platforms` cross-builds the addon with Debian's
 * g++-aarch64-linux-gnu, scalar and NEON kernels), laid out as npm installs them — run in the
 * official arm64 Node under qemu-user (test/support/arm64.ts says what that needs; .ci/run installs
 * Debian's qemu-user-static and g++-aarch64-linux-gnu, then packs release/). `require('nodeformer')`
 * must load the package's addon and compute, the addon pass its load-time self-check with NEON
 * detected, and the kernel parity subset below pass with it, which runs every kernel on each
 * variant the addon has (neon and scalar) against the float64 reference and the SIMD vocabulary
 * lane by lane against scalar. The subset is the kernel tests that need no child process (qemu runs
 * no arm64 child without binfmt_misc), sized to a few minutes under qemu on 2 cores. Skips, saying
 * why, where qemu, the arm64 runtime or the release tarballs are missing.
 */
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { IsaInfo } from '../lib/native/core';
import { arm64Env, arm64Runtime, type Arm64Runtime } from './support/arm64';
import { repoRoot } from './support/bundle';
import { layOutRelease } from './support/release';

/**
 * The kernel tests run under qemu (each loops over every variant the addon has). Measured under qemu
 * 7.2 on a 2-core EPYC shared with other builds: simd 201 s, ops_parity 27 s, gemm 7 s, prepack_ops
 * 5 s, finite 4 s, layernorm 0.2 s, plus about a minute to start vitest; attention (103 s) and
 * feedforward (62 s) are left out, their kernels being in ops_parity (attention and feed-forward
 * families, forward and backward, odd T and head widths) and in the self-check.
 */
const arm64Subset = [
  'test/simd.test.ts', 'test/ops_parity.test.ts', 'test/gemm.test.ts', 'test/layernorm.test.ts', 'test/finite.test.ts',
  'test/prepack_ops.test.ts',
];

const found = arm64Runtime();
const reason = 'reason' in found ? found.reason : null;
if (reason) console.log(`linux-arm64 under qemu skipped: ${reason}`);

interface VitestReport {
  numPassedTests: number; numFailedTests: number; numPendingTests: number; numTotalTests: number;
  testResults: { name: string; status: string; startTime: number; endTime: number; message: string;
    assertionResults: { fullName: string; status: string; failureMessages: string[] }[] }[];
}

describe.skipIf(reason !== null)('linux-arm64 (NEON) under qemu', () => {
  const rt = found as Arm64Runtime;
  let dir = '';
  let arm64Addon = '';
  // Asynchronous: a worker blocked for minutes misses vitest's own messages.
  const run = promisify(execFile);
  /** Runs the arm64 node under qemu with `args` (in the clone, or `cwd`); its stdout. */
  const node = async (args: string[], env: NodeJS.ProcessEnv = {}, timeout = 60_000, cwd = repoRoot): Promise<string> =>
    (await run(rt.qemu, [rt.node, ...args], { cwd, env: arm64Env(rt, arm64Addon, env), encoding: 'utf8', timeout, maxBuffer: 1 << 26 })).stdout;

  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nf-arm64-'));
    arm64Addon = path.join(layOutRelease(dir, 'linux-arm64-gnu'), 'nodeformer.node');
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('installed from its tarball, require(\'nodeformer\') loads the package\'s addon in arm64 Node and computes', async () => {
    // No NF_ADDON_PATH: the loader must find @nodeformer/linux-arm64-gnu itself.
    const script = `const nf = require('nodeformer'); const lin = new nf.Linear({ inFeatures: 3, outFeatures: 2, seed: 1 });
      console.log(JSON.stringify({ addon: nf.nativeAddonPath, y: Array.from(lin.forward(nf.Tensor.from(Float32Array.of(1, 2, 3), [1, 3])).toArray()) }));`;
    const r = JSON.parse(await node(['-e', script], { NF_ADDON_PATH: '' }, 60_000, dir)) as { addon: string; y: number[] };
    expect(r.addon).toBe(fs.realpathSync(arm64Addon));
    const nf = await import('../lib/index');
    const here = Array.from(new nf.Linear({ inFeatures: 3, outFeatures: 2, seed: 1 }).forward(nf.Tensor.from(Float32Array.of(1, 2, 3), [1, 3])).toArray());
    r.y.forEach((v, i) => expect(Math.abs(v - here[i])).toBeLessThanOrEqual(1e-6 * Math.max(1, Math.abs(here[i]))));
  });

  it('loads in arm64 Node, detects NEON and passes the load-time self-check; NF_ISA lowers it to scalar, a failed check too', async () => {
    const script = `const a = require(${JSON.stringify(arm64Addon)}); const r = { arch: process.arch, info: a.isaInfo() };
      try { a.setIsa('avx2'); } catch (e) { r.avx2 = e.message; } console.log(JSON.stringify(r));`;
    const r = JSON.parse(await node(['-e', script])) as { arch: string; info: IsaInfo; avx2?: string };
    expect(r.arch).toBe('arm64');
    expect(r.info).toMatchObject({ active: 'neon', detected: 'neon', compiled: ['scalar', 'neon'], available: ['scalar', 'neon'], rejected: [] });
    expect(r.info.selfCheck.checked.map((c) => c.isa)).toEqual(['neon']);
    expect(r.info.selfCheck.checked[0].maxError).toBeLessThan(r.info.selfCheck.tolerance / 100);
    expect(r.avx2).toMatch(/cannot run the avx2 kernels \(best available: neon\)/);
    console.log(`arm64 self-check: neon max relative error ${r.info.selfCheck.checked[0].maxError.toExponential(1)}, ${r.info.selfCheck.ms.toFixed(0)} ms under qemu`);
    const info = async (env: NodeJS.ProcessEnv) =>
      JSON.parse(await node(['-p', `JSON.stringify(require(${JSON.stringify(arm64Addon)}).isaInfo())`], env)) as IsaInfo;
    expect((await info({ NF_ISA: 'scalar' })).active).toBe('scalar');
    const failed = await info({ NF_SELFCHECK_FAIL: 'neon' });
    expect(failed).toMatchObject({ active: 'scalar', detected: 'neon', available: ['scalar'] });
    expect(failed.rejected).toEqual([{ isa: 'neon', reason: expect.stringMatching(/simulated by NF_SELFCHECK_FAIL/) }]);
  });

  it('passes the kernel parity subset on neon and scalar (vitest in arm64 Node)', async () => {
    const out = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'nf-arm64-report-')), 'report.json');
    const t0 = Date.now();
    let log = '';
    try {
      // Two files at a time (the project's config runs one: its leak and latency tests measure their
      // process; these kernel tests do not).
      log = await node([path.join(repoRoot, 'node_modules/vitest/vitest.mjs'), 'run', '--pool=threads', '--fileParallelism',
        '--maxWorkers=2', '--reporter=json', `--outputFile.json=${out}`, ...arm64Subset], {}, 1_500_000);
    } catch (e) {
      log = `${(e as { stdout?: string }).stdout ?? ''}${(e as { stderr?: string }).stderr ?? ''}${(e as Error).message}`;
    }
    const seconds = (Date.now() - t0) / 1000;
    expect(fs.existsSync(out), `vitest under qemu wrote no report:\n${log.slice(-4000)}`).toBe(true);
    const report = JSON.parse(fs.readFileSync(out, 'utf8')) as VitestReport;
    const files = report.testResults.map((f) => `${path.relative(repoRoot, f.name)} ${((f.endTime - f.startTime) / 1000).toFixed(0)} s`);
    console.log(`arm64 parity subset under qemu: ${report.numPassedTests} passed, ${report.numFailedTests} failed, ` +
      `${report.numPendingTests} skipped in ${seconds.toFixed(0)} s (${files.join(', ')})`);
    const failures = report.testResults.flatMap((f) => [
      ...(f.status === 'failed' && f.message ? [`${path.relative(repoRoot, f.name)}: ${f.message}`] : []),
      ...f.assertionResults.filter((a) => a.status === 'failed').map((a) => `${a.fullName}: ${a.failureMessages[0]?.split('\n')[0]}`),
    ]);
    expect(failures).toEqual([]);
    expect(report.testResults.map((f) => path.relative(repoRoot, f.name)).sort()).toEqual([...arm64Subset].sort());
    expect(report.numPassedTests).toBeGreaterThan(100);
  }, 1_600_000);
});
