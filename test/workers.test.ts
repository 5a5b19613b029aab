/**
 * The addon is context-aware: it loads and trains in several worker_threads at once while the
 * main thread trains too, and every thread gets exactly the results of running alone.
 */
import { Worker } from 'node:worker_threads';

import { describe, expect, it } from 'vitest';

import { bundle, bundleEnv } from './support/bundle';
import { runTask, type TaskResult } from './support/worker_task';

function inWorker(file: string, seed: number, steps: number): Promise<TaskResult> {
  return new Promise((resolve, reject) => {
    const w = new Worker(file, { workerData: { seed, steps }, env: bundleEnv() });
    w.once('message', (r: TaskResult) => resolve(r));
    w.once('error', reject);
    w.once('exit', (code) => code !== 0 && reject(new Error(`worker exited with ${code}`)));
  });
}

describe('worker_threads', () => {
  it('four worker threads and the main thread train and infer at once, each as if alone', async () => {
    const file = bundle('test/support/worker_task.ts');
    const seeds = [11, 12, 13, 14], steps = 6;
    const [main, ...workers] = await Promise.all([runTask(10, steps), ...seeds.map((s) => inWorker(file, s, steps))]);
    const alone = [await runTask(10, steps)];
    for (const s of seeds) alone.push(await runTask(s, steps));
    const got = [main, ...workers];
    got.forEach((r, i) => {
      expect(r.losses.every(Number.isFinite)).toBe(true);
      expect(r.losses, `thread ${i} losses`).toEqual(alone[i].losses);
      expect(r.logits, `thread ${i} logits`).toEqual(alone[i].logits);
    });
    expect(new Set(got.map((r) => r.losses[0])).size).toBe(got.length);
  });
});
