/**
 * DataLoader over an ImageFolder of generated JPEGs of awkward sizes: batch shapes and targets,
 * length with and without dropLast, every image once per epoch, a seeded order and augmentation
 * that do not depend on the number of workers (each batch equals ImageFolder.get with the
 * per-sample seed), worker threads gone after an iteration ends, breaks (50 times) or fails on a
 * corrupt file (named in the error), and option checks.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { sampleSeed } from '../lib/data/transforms';
import { DataLoader, ImageFolder, NodeformerError, type ImageBatch } from '../lib/index';
import { makeImageFolder, threadCount } from './support/image_folder';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'nf-loader-'));
let root = '';
beforeAll(async () => {
  root = await makeImageFolder(path.join(tmp, 'data'), { classes: 3, perClass: 9, size: (i) => [20 + 7 * i, 31 - 2 * i], seed: 2 });
  fs.rmSync(path.join(root, 'class-2', '0008.jpg')); // 26 images: 9 + 9 + 8
});
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** Every batch of one iteration, as plain arrays. */
async function collect(loader: DataLoader): Promise<{ shape: number[]; input: number[]; target: number[] }[]> {
  const out = [];
  for await (const b of loader) {
    out.push({ shape: [...b.input.shape], input: Array.from(b.input.data), target: Array.from(b.target.data) });
    expect(b.input.dtype).toBe('float32');
    expect(b.target.dtype).toBe('int32');
    b.input.dispose();
    b.target.dispose();
  }
  return out;
}

describe('DataLoader', () => {
  it('batches [B, 3, H, W] and [B] with the last batch short, or dropped', async () => {
    const ds = new ImageFolder(root, { imageSize: 11 });
    expect(ds.length).toBe(26);
    const loader = new DataLoader(ds, { batchSize: 4 });
    expect(loader.length).toBe(7);
    const batches = await collect(loader);
    expect(batches.map((b) => b.shape)).toEqual([...Array<number[]>(6).fill([4, 3, 11, 11]), [2, 3, 11, 11]]);
    expect(batches.flatMap((b) => b.target)).toEqual(Array.from(ds.targets)); // no shuffle: the dataset's order
    const dropped = new DataLoader(ds, { batchSize: 4, dropLast: true });
    expect(dropped.length).toBe(6);
    expect((await collect(dropped)).length).toBe(6);
    const whole = new DataLoader(ds, { batchSize: 100, workers: 3 });
    expect(whole.length).toBe(1);
    expect((await collect(whole))[0].shape).toEqual([26, 3, 11, 11]);
  });

  it('shuffles per epoch from the seed, and gives the same batches with 1 or 3 workers, each image as ImageFolder.get with its seed', async () => {
    const ds = new ImageFolder(root, { imageSize: 9, transform: 'train' });
    const a = new DataLoader(ds, { batchSize: 5, shuffle: true, seed: 123, workers: 1, prefetch: 1 });
    const b = new DataLoader(ds, { batchSize: 5, shuffle: true, seed: 123, workers: 3, prefetch: 5 });
    const [a0, a1] = [await collect(a), await collect(a)];
    const b0 = await collect(b);
    expect(b0).toEqual(a0);
    const targets = (bs: typeof a0) => bs.flatMap((x) => x.target);
    expect(targets(a0).sort()).toEqual(Array.from(ds.targets).sort());
    expect(targets(a1)).not.toEqual(targets(a0)); // epoch 1 reshuffles
    b.setEpoch(1);
    expect(await collect(b)).toEqual(a1);
    // Which image is which: find batch 0's first image among the dataset's with the seed the loader gives it in epoch 0.
    const per = 3 * 9 * 9;
    const first = a0[0].input.slice(0, per);
    let found = -1;
    for (let i = 0; i < ds.length && found < 0; i++)
      if (Array.from((await ds.get(i, sampleSeed(123, 0, i))).input).every((v, k) => v === first[k])) found = i;
    expect(found).toBeGreaterThanOrEqual(0);
    expect(a0[0].target[0]).toBe(ds.samples[found].target);
    const other = await collect(new DataLoader(ds, { batchSize: 5, shuffle: true, seed: 124 }));
    expect(targets(other)).not.toEqual(targets(a0));
  });

  it('terminates its workers when an iteration ends, breaks (50 times) or fails', async () => {
    const ds = new ImageFolder(root, { imageSize: 8, transform: 'train' });
    const loader = new DataLoader(ds, { batchSize: 3, shuffle: true, workers: 2 });
    await collect(loader); // warm up: libuv's thread pool and sharp's threads start once
    const threads = threadCount(), handles = process.getActiveResourcesInfo().length;
    for (let k = 0; k < 50; k++) {
      let seen = 0;
      for await (const batch of loader) {
        batch.input.dispose();
        if (++seen === 2) break;
      }
      expect(seen).toBe(2);
    }
    expect(threadCount()).toBeLessThanOrEqual(threads);
    expect(process.getActiveResourcesInfo().length).toBeLessThanOrEqual(handles);

    const bad = path.join(root, 'class-1', '0003.jpg'), saved = fs.readFileSync(bad);
    fs.writeFileSync(bad, saved.subarray(0, 100)); // cut inside the image data
    try {
      let err: unknown, got = 0;
      try {
        for await (const batch of new DataLoader(ds, { batchSize: 4, workers: 2 })) {
          got += (batch as ImageBatch).target.size;
        }
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(NodeformerError);
      expect((err as NodeformerError).code).toBe('ERR_NF_FORMAT');
      expect((err as Error).message).toContain(`Cannot load the image ${bad}`);
      expect(got).toBe(12); // the batches before the one holding image 12
    } finally {
      fs.writeFileSync(bad, saved);
    }
    expect(threadCount()).toBeLessThanOrEqual(threads);
  });

  it('keeps the event loop turning while it decodes', async () => {
    const ds = new ImageFolder(root, { imageSize: 64, transform: 'train' });
    let last = performance.now(), worst = 0;
    const tick = setInterval(() => {
      const now = performance.now();
      worst = Math.max(worst, now - last);
      last = now;
    }, 2);
    try {
      for (let e = 0; e < 3; e++) await collect(new DataLoader(ds, { batchSize: 13, workers: 1 }));
    } finally {
      clearInterval(tick);
    }
    expect(worst).toBeLessThan(100); // the normalisation runs in the worker; the main thread only copies batches
  });

  it('rejects bad options with messages naming them', () => {
    const ds = new ImageFolder(root, { imageSize: 8 });
    expect(() => new DataLoader(ds, { batchsize: 4 } as never)).toThrow(/'batchsize' \(did you mean 'batchSize'\?\)/);
    expect(() => new DataLoader(ds, { batchSize: 0 })).toThrow(/a positive integer for options\.batchSize/);
    expect(() => new DataLoader(ds, { workers: 1.5 })).toThrow(/options\.workers/);
    expect(() => new DataLoader(ds, { prefetch: 0 })).toThrow(/options\.prefetch/);
    expect(() => new DataLoader(ds, { shuffle: 'yes' as never })).toThrow(/options\.shuffle/);
    expect(() => new DataLoader(ds, { seed: -1 })).toThrow(/seed/);
    expect(() => new DataLoader({ samples: [] } as never)).toThrow(/an ImageFolder for dataset/);
    expect(() => new DataLoader(ds).setEpoch(-1)).toThrow(/epoch/);
  });
});
