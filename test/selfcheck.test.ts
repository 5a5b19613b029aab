/**
 * The load-time known-answer self-check (native/cpu/selfcheck.cpp): before the first kernel
 * variant is chosen, every kernel family runs on a tiny fixed input under each variant the CPU has
 * and under the scalar one; a variant that disagrees is rejected, the next one down is used,
 * isaInfo says which and why, setIsa refuses it, and the loader warns once per process.
 * NF_SELFCHECK_FAIL=<variants> corrupts the named variants' check (in a child process here).
 */
import { execFileSync } from 'node:child_process';

import { describe, expect, it } from 'vitest';

import { native } from '../lib/native/addon';
import type { Isa } from '../lib/native/core';
import { bundle, bundleEnv } from './support/bundle';
import type { IsaReport } from './support/isa_child';

const info = native.isaInfo();
/** This build's variants, slowest first (scalar, avx2, avx512 on x64; scalar, neon on arm64). */
const order: Isa[] = info.compiled;
const candidates = order.slice(1, order.indexOf(info.detected) + 1).reverse(); // checked, best first

let child: string | undefined;
/** Loads the library in a child process (and a worker thread of it) with `env` (and no NF_ISA of this run's). */
function load(env: Record<string, string>): { main: IsaReport; worker: IsaReport } {
  child ??= bundle('test/support/isa_child.ts');
  const base = bundleEnv();
  delete base.NF_ISA;
  delete base.NF_SELFCHECK_FAIL;
  const out = execFileSync(process.execPath, [child], { env: { ...base, ...env }, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  return JSON.parse(out) as { main: IsaReport; worker: IsaReport };
}

describe('load-time self-check', () => {
  it('passes every variant this CPU runs, well within its tolerance and its time budget', () => {
    expect(info.rejected).toEqual([]);
    expect(info.available).toEqual(order.slice(0, order.indexOf(info.detected) + 1));
    expect(info.selfCheck.checked.map((c) => c.isa)).toEqual(candidates);
    for (const c of info.selfCheck.checked) expect(c.maxError, c.isa).toBeLessThan(info.selfCheck.tolerance / 100);
    expect(info.selfCheck.tolerance).toBe(1e-4);
    console.log(`self-check at load: ${info.selfCheck.ms.toFixed(2)} ms for ${candidates.join(', ') || 'no variant'} ` +
      `(largest relative error ${info.selfCheck.checked.map((c) => `${c.isa} ${c.maxError.toExponential(1)}`).join(', ') || '-'})`);
    expect(info.selfCheck.ms).toBeLessThan(20);
  });

  it('emits no warning when nothing is rejected', () => {
    const { main, worker } = load({});
    expect(main.warnings).toEqual([]);
    expect(worker.warnings).toEqual([]);
    expect(main.info.rejected).toEqual([]);
  });

  it.runIf(candidates.length > 0)('rejects a variant that disagrees, falls back to the next one down, and warns once per process', () => {
    const [best, ...lower] = candidates;
    const { main, worker } = load({ NF_SELFCHECK_FAIL: best });
    const next = lower[0] ?? 'scalar';
    expect(main.info.rejected).toEqual([{ isa: best, reason: expect.stringMatching(/^gemm none epilogue C: relative error 2\.0e\+00.*simulated by NF_SELFCHECK_FAIL/) }]);
    expect(main.info.active).toBe(next);
    expect(main.info.detected).toBe(best);
    expect(main.info.available).toEqual(order.slice(0, order.indexOf(best)));
    expect(main.info.selfCheck.checked.find((c) => c.isa === best)?.maxError).toBe(2);
    expect(main.setIsa[best]).toMatch(new RegExp(`the ${best} kernels failed the load-time self-check and are disabled \\(gemm none`));
    expect(main.setIsa[next]).toBe('ok');
    expect(main.warnings).toHaveLength(1);
    expect(main.warnings[0]).toMatch(new RegExp(`^NF_ISA_REJECTED: nodeformer: the CPU kernel variant ${best} \\(gemm none epilogue C: .*\\) failed the load-time self-check .*running ${next} instead`));
    expect(worker.warnings, 'a second load in the same process (a worker thread) does not warn again').toEqual([]);
    expect(worker.info).toEqual(main.info);
  });

  it.runIf(candidates.length > 1)('rejects several variants, down to scalar', () => {
    const { main } = load({ NF_SELFCHECK_FAIL: candidates.join(',') });
    expect(main.info.rejected.map((r) => r.isa)).toEqual(candidates);
    expect(main.info.active).toBe('scalar');
    expect(main.info.available).toEqual(['scalar']);
    expect(main.warnings).toHaveLength(1);
    expect(main.warnings[0]).toMatch(new RegExp(`variants ${candidates.join(' \\(.*\\); ')} \\(.*\\) failed .*running scalar instead`));
  });

  it.runIf(candidates.length > 1)('NF_ISA asking for a rejected variant gets the next one down', () => {
    const { main } = load({ NF_SELFCHECK_FAIL: 'avx2', NF_ISA: 'avx2' });
    expect(main.info.active).toBe('scalar');
    expect(main.info.available).toEqual(order.filter((i) => i !== 'avx2' && order.indexOf(i) <= order.indexOf(info.detected)));
    expect(main.setIsa.avx512).toBe('ok');
  });
});
