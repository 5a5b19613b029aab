/**
 * The kernel thread pool survives resizing between jobs: a worker started by setNumThreads must
 * not take the job posted after it for one it has not seen (which made run() wait forever for a
 * count that had gone below zero: a hang with no CPU use, seen once in CI). The loop runs in a
 * child process with a timeout, so a regression fails instead of hanging the suite; it runs with
 * the threads sleeping at once (the default) and spinning before they sleep (NF_THREAD_SPIN_US).
 * Each iteration also runs a region shorter than a sleeping worker's wake-up, whose result must
 * come out exact (the caller closes such a job, and the late worker must run none of it).
 */
import { execFile } from 'node:child_process';

import { describe, expect, it } from 'vitest';

import { native } from '../lib';
import { bundle, bundleEnv } from './support/bundle';

describe('thread pool', () => {
  it.each([['', 0], ['100', 100], ['99999', 10000]])('resizes and runs a threaded op right after, 3,000 times, without deadlock (NF_THREAD_SPIN_US=%s)', async (spin, us) => {
    const file = bundle('test/support/resize_loop.ts');
    const out = await new Promise<string>((resolve, reject) => {
      execFile(process.execPath, [file, '3000'], { env: { ...bundleEnv(), NF_THREAD_SPIN_US: spin }, timeout: 60_000 },
        (err, stdout) => (err ? reject(err) : resolve(stdout)));
    });
    expect(JSON.parse(out.trim())).toEqual({ iterations: 3000, c: 32, spin: us, counts: 40_000 });
  });

  it('spins as set, with the same results, and rejects a spin that is not an integer in [0, 10000]', () => {
    const before = native.threadSpin(), rng = () => Float32Array.from({ length: 300 * 200 }, (_, i) => Math.sin(i * 0.37));
    const A = rng(), B = rng(), run = () => {
      const C = new Float32Array(300 * 300);
      native.gemm({ M: 300, N: 300, K: 200, transB: true, A, B, C });
      return C;
    };
    try {
      const sleeping = run();
      native.setThreadSpin(100);
      expect(native.threadSpin()).toBe(100);
      expect(run()).toEqual(sleeping);
      for (const bad of [-1, 1.5, 10001, Number.NaN, '100'])
        expect(() => native.setThreadSpin(bad as number)).toThrow(expect.objectContaining({ code: 'ERR_NF_INVALID_ARG', message: expect.stringMatching(/setThreadSpin: .* for microseconds/) }));
      expect(native.threadSpin()).toBe(100);
    } finally {
      native.setThreadSpin(before);
    }
  });
});
