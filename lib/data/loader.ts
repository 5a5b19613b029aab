/**
 * DataLoader: batches of an ImageFolder as tensors, decoded and augmented ahead of the training
 * step on worker threads. Each iteration starts its workers, keeps up to `prefetch` batches in
 * the making (spread round-robin over the workers), yields them in order as { input [B, 3, H, W]
 * float32, target [B] int32 }, and terminates its workers when it ends, breaks or fails. The
 * order (a seeded shuffle per epoch, DistributedSampler's with one rank) and each image's crop and
 * flip (seeded by seed, epoch and index) depend only on the seed and the epoch: the same batches
 * for any number of workers.
 */
import * as os from 'node:os';
import type { Worker } from 'node:worker_threads';

import { invalidArg, NodeformerError } from '../validation/errors';
import { bool, positiveInt, seedOf } from '../validation/values';
import { OptionKeys } from '../validation/options';
import { resolveOptional } from '../core/optional';
import { DistributedSampler } from '../distributed/sampler';
import { Tensor } from '../core/tensor';
import type { BatchReply } from './decode_worker';
import { ImageFolder } from './image_folder';
import { startDecodeWorker } from './workers';

/** Options of DataLoader. */
export interface DataLoaderOptions {
  /** Images per batch (default 1). */
  batchSize?: number;
  /** Reshuffle the images every epoch (default false: the dataset's order). */
  shuffle?: boolean;
  /** Seed of the shuffle and of the train transform's crops and flips (default 0). */
  seed?: number;
  /** Leave out the last batch when it is smaller than batchSize (default false). */
  dropLast?: boolean;
  /** Worker threads that decode (default: the cores but one, 1 to 4). */
  workers?: number;
  /** Batches decoded ahead of the one being used, at most (default 2 per worker). */
  prefetch?: number;
}
const OPTIONS = new OptionKeys<DataLoaderOptions>('DataLoader options', {
  batchSize: true, shuffle: true, seed: true, dropLast: true, workers: true, prefetch: true,
});

/** One batch: images [B, 3, imageSize, imageSize] (normalised) and their class indices [B]. */
export interface ImageBatch {
  input: Tensor<'float32'>;
  target: Tensor<'int32'>;
}

/** A promise that settles from outside, rejections handled until it is awaited. */
function deferred<T>(): { promise: Promise<T>; resolve: (v: T) => void; reject: (e: Error) => void } {
  let resolve!: (v: T) => void, reject!: (e: Error) => void;
  const promise = new Promise<T>((res, rej) => ((resolve = res), (reject = rej)));
  promise.catch(() => undefined);
  return { promise, resolve, reject };
}

/**
 * Batches of `dataset` for `for await (const { input, target } of loader)`. Each iteration is one
 * epoch: the epoch setEpoch() chose, or else the one after the previous iteration's (0 first), so
 * a new loader with the same seed repeats the same epochs.
 */
export class DataLoader implements AsyncIterable<ImageBatch> {
  readonly dataset: ImageFolder;
  readonly batchSize: number;
  readonly dropLast: boolean;
  readonly workers: number;
  readonly prefetch: number;
  private readonly sampler: DistributedSampler;
  private epoch = 0;

  constructor(dataset: ImageFolder, options: DataLoaderOptions = {}) {
    if (!(dataset instanceof ImageFolder)) invalidArg('dataset', 'an ImageFolder', dataset);
    const o = OPTIONS.check('options', options);
    this.dataset = dataset;
    this.batchSize = positiveInt('options.batchSize', o.batchSize ?? 1);
    this.dropLast = bool('options.dropLast', o.dropLast ?? false);
    this.workers = positiveInt('options.workers', o.workers ?? Math.min(4, Math.max(1, os.availableParallelism() - 1)));
    this.prefetch = positiveInt('options.prefetch', o.prefetch ?? 2 * this.workers);
    this.sampler = new DistributedSampler(dataset.length, {
      shuffle: bool('options.shuffle', o.shuffle ?? false), seed: seedOf(o.seed ?? 0), rank: 0, worldSize: 1,
    });
  }

  /** Batches per epoch. */
  get length(): number {
    const n = this.dataset.length / this.batchSize;
    return this.dropLast ? Math.floor(n) : Math.ceil(n);
  }

  /** The epoch the next iteration reads (its shuffle and augmentation). */
  setEpoch(epoch: number): void {
    if (!Number.isInteger(epoch) || epoch < 0) invalidArg('epoch', 'a non-negative integer', epoch);
    this.epoch = epoch;
  }

  [Symbol.asyncIterator](): AsyncIterator<ImageBatch> {
    return this.iterate(this.epoch++);
  }

  private async *iterate(epoch: number): AsyncGenerator<ImageBatch> {
    this.sampler.setEpoch(epoch);
    const order = this.sampler.indices(), count = this.length, B = this.batchSize, size = this.dataset.transform.imageSize;
    const targets = this.dataset.targets;
    const pending = new Map<number, ReturnType<typeof deferred<Float32Array>>>();
    let failure: Error | null = null; // a worker that failed or stopped fails this batch and every later one
    const failAll = (e: Error) => {
      failure ??= e;
      for (const d of pending.values()) d.reject(failure);
    };
    const workers: Worker[] = [];
    try {
      const init = {
        sharpPath: resolveOptional('sharp')!, files: this.dataset.samples.map((s) => s.path),
        transform: this.dataset.transform, seed: this.sampler.seed,
      };
      for (let w = 0; w < Math.min(this.workers, count); w++) {
        const worker = startDecodeWorker(init);
        worker.on('message', (r: BatchReply) => {
          const d = pending.get(r.id);
          if (!d) return;
          if ('error' in r) d.reject(new NodeformerError('ERR_NF_FORMAT', r.error));
          else d.resolve(r.input);
        });
        worker.on('error', (e) => failAll(new NodeformerError('ERR_NF_LOAD', `A DataLoader worker failed: ${e.message}`)));
        worker.on('exit', (code) => failAll(new NodeformerError('ERR_NF_LOAD', `A DataLoader worker stopped (exit code ${code})`)));
        workers.push(worker);
      }
      let sent = 0;
      for (let b = 0; b < count; b++) {
        for (; sent < count && sent - b < this.prefetch; sent++) {
          const d = deferred<Float32Array>();
          pending.set(sent, d);
          if (failure) d.reject(failure);
          else workers[sent % workers.length].postMessage({ id: sent, epoch, indices: order.slice(sent * B, Math.min((sent + 1) * B, order.length)) });
        }
        const input = await pending.get(b)!.promise;
        pending.delete(b);
        const idx = order.subarray(b * B, Math.min((b + 1) * B, order.length));
        yield { input: Tensor.from(input, [idx.length, 3, size, size]), target: Tensor.from(Int32Array.from(idx, (i) => targets[i]), [idx.length]) };
      }
    } finally {
      pending.clear();
      for (const w of workers) w.removeAllListeners().on('error', () => undefined); // the others may fail as they stop
      await Promise.all(workers.map((w) => w.terminate()));
    }
  }
}
