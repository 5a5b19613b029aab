/**
 * When a pool thread cannot allocate its scratch buffer (memory ran out), the op it was working
 * for throws an out-of-memory error instead of returning a result with that thread's share
 * missing (or, in the attention core, crashing): the kernels report the skipped work
 * (threadpool.h's report_failure) and the op binding turns it into an error. NF_TEST_SCRATCH_FAIL=1
 * makes every scratch allocation inside a parallel region fail (allocator.h), in a child process.
 */
import { execFileSync } from 'node:child_process';

import { describe, expect, it } from 'vitest';

import { bundle, bundleEnv } from './support/bundle';

type Outcome = { threw: string | null; exact: boolean };

describe('a pool thread without its scratch buffer', () => {
  it('makes its op throw ERR_NF_KERNEL (out of memory), never return a partial result or crash', () => {
    const child = bundle('test/support/scratch_failure_child.ts');
    const out = execFileSync(process.execPath, [child], {
      env: { ...bundleEnv(), NF_TEST_SCRATCH_FAIL: '1', NF_NUM_THREADS: '2' }, encoding: 'utf8', timeout: 120_000,
    });
    const r = JSON.parse(out) as Record<'gemm' | 'linear' | 'attention', Outcome[]>;
    for (const [op, calls] of Object.entries(r)) {
      for (const c of calls) {
        // Either the pool thread never joined (the calling thread did every chunk: the exact result) or the op threw.
        if (c.threw === null) expect(c.exact, `${op}: a result returned differs from the single-threaded one`).toBe(true);
        else expect(c.threw, op).toMatch(/^ERR_NF_KERNEL: .*out of memory: a thread's scratch buffer/);
      }
      console.log(`${op}: ${calls.filter((c) => c.threw).length} of ${calls.length} calls threw, the rest exact`);
    }
    // The calling thread's own buffer, asked for inside the region, fails every time.
    expect(r.linear.every((c) => c.threw)).toBe(true);
    // A pool thread joins some of 20 calls of a few milliseconds each.
    expect(r.gemm.some((c) => c.threw)).toBe(true);
    expect(r.attention.some((c) => c.threw)).toBe(true);
  });
});
