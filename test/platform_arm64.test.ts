/**
 * linux-arm64: the addon cross-compiled here (scripts/cross/linux-arm64.sh: scalar and NEON kernels)
 * run in the official arm64 Node under qemu-user (test/support/arm64.ts says what that needs; .ci/run
 * installs Debian's qemu-user-static and g++-aarch64-linux-gnu). It must load, pass its load-time
 * self-check with NEON detected, and pass the kernel parity subset below, which runs every kernel on
 * each variant the addon has (neon and scalar) against the float64 reference and the SIMD vocabulary
 * lane by lane against scalar. The subset is the kernel tests that need no child process (qemu runs
 * no arm64 child without binfmt_misc), sized to a few minutes under qemu on 2 cores. Skips, saying
 * why, where qemu, the arm64 runtime or the cross compiler is missing.
 */
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';

import { beforeAll, describe, expect, it } from 'vitest';

import type { IsaInfo } from '../lib/native/core';
import { arm64Addon, arm64Env, arm64Runtime, type Arm64Runtime, crossCompiler } from './support/arm64';
import { repoRoot } from './support/bundle';

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
  // Asynchronous: a worker blocked for minutes misses vitest's own messages.
  const run = promisify(execFile);
  /** Runs the arm64 node under qemu with `args`; its stdout. */
  const node = async (args: string[], env: NodeJS.ProcessEnv = {}, timeout = 60_000): Promise<string> =>
    (await run(rt.qemu, [rt.node, ...args], { cwd: repoRoot, env: arm64Env(rt, env), encoding: 'utf8', timeout, maxBuffer: 1 << 26 })).stdout;

  beforeAll(async () => {
    // Incremental: a no-op after the first build unless native/ changed.
    if (crossCompiler()) {
      const t0 = Date.now();
      await run('bash', [path.join(repoRoot, 'scripts/cross/linux-arm64.sh')], { timeout: 1_200_000, maxBuffer: 1 << 26 });
      console.log(`scripts/cross/linux-arm64.sh: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    }
    expect(fs.existsSync(arm64Addon), arm64Addon).toBe(true);
  }, 1_200_000);

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
      log = await node([path.join(repoRoot, 'node_modules/vitest/vitest.mjs'), 'run', '--pool=threads', '--reporter=json',
        `--outputFile.json=${out}`, ...arm64Subset], {}, 1_500_000);
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
