/**
 * A DataLoader worker thread: decodes, transforms and normalises the images of the batches it is
 * sent, one image at a time (so that each worker holds at most one of libuv's threads for sharp,
 * leaving the others to the training step's native work), and sends each batch back as one
 * float32 array whose buffer is transferred, not copied. A file that fails is reported by message
 * (lib/data/loader.ts turns it into an ERR_NF_FORMAT error naming the file). Started by
 * lib/data/workers.ts; it does not load the addon.
 */
import { parentPort, workerData } from 'node:worker_threads';

import type { Sharp } from './decode';
import { loadSample } from './decode';
import { type ImageTransform, sampleSeed } from './transforms';

/** What a worker is started with. */
export interface WorkerInit {
  /** sharp's entry file, resolved (and loaded first) by the main thread. */
  sharpPath: string;
  files: readonly string[];
  transform: ImageTransform;
  seed: number;
}

/** A batch to make: the dataset indices of its images, in order. */
export interface BatchRequest {
  id: number;
  epoch: number;
  indices: Int32Array;
}

/** A made batch ([n, 3, size, size] float32), or why it failed. */
export type BatchReply = { id: number; input: Float32Array } | { id: number; error: string };

async function makeBatch(sharp: Sharp, init: WorkerInit, req: BatchRequest): Promise<Float32Array> {
  const per = 3 * init.transform.imageSize * init.transform.imageSize;
  const input = new Float32Array(req.indices.length * per);
  for (let b = 0; b < req.indices.length; b++) {
    const i = req.indices[b];
    await loadSample(sharp, init.files[i], init.transform, sampleSeed(init.seed, req.epoch, i), input, b * per);
  }
  return input;
}

if (parentPort) {
  const port = parentPort, init = workerData as WorkerInit;
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const sharp = require(init.sharpPath) as Sharp;
  let queue = Promise.resolve(); // batches one after another, in the order sent
  port.on('message', (req: BatchRequest) => {
    queue = queue.then(() => makeBatch(sharp, init, req).then(
      (input) => port.postMessage({ id: req.id, input } satisfies BatchReply, [input.buffer as ArrayBuffer]),
      (e: Error) => port.postMessage({ id: req.id, error: e.message } satisfies BatchReply),
    ));
  });
}
