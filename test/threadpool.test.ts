/**
 * The kernel thread pool survives resizing between jobs: a worker started by setNumThreads must
 * not take the job posted after it for one it has not seen (which made run() wait forever for a
 * count that had gone below zero: a hang with no CPU use, seen once in CI). The loop runs in a
 * child process with a timeout, so a regression fails instead of hanging the suite.
 */
import { execFile } from 'node:child_process';

import { describe, expect, it } from 'vitest';

import { bundle, bundleEnv } from './support/bundle';

describe('thread pool', () => {
  it('resizes and runs a threaded op right after, 3,000 times, without deadlock', async () => {
    const file = bundle('test/support/resize_loop.ts');
    const out = await new Promise<string>((resolve, reject) => {
      execFile(process.execPath, [file, '3000'], { env: bundleEnv(), timeout: 60_000 }, (err, stdout) => (err ? reject(err) : resolve(stdout)));
    });
    expect(JSON.parse(out.trim())).toEqual({ iterations: 3000, c: 32 });
  });
});
