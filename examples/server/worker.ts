/**
 * The inference thread: loads the checkpoint once, then for each batch of posted PNGs
 * preprocesses them as `nodeformer predict` does (lib/cli/images.ts: digitPixels, then digitBatch,
 * normalised as the demo's training), runs one forward over the valid ones and answers with
 * softmax probabilities. All the CPU work of a prediction happens here, so the HTTP thread's
 * event loop stays free.
 */
import { parentPort, workerData } from 'node:worker_threads';

import { digitBatch } from '../../lib/cli/images';
import { loadClassifier } from './checkpoint';
import { HttpError } from './http_error';
import { pngToDigit } from './image';
import type { FromWorker, Prediction, Refusal, ToWorker, WorkerInit } from './protocol';

const port = parentPort!;
const { checkpoint } = workerData as WorkerInit;
// A checkpoint that cannot be loaded throws here: the worker's 'error' event tells the HTTP thread.
const model = loadClassifier(checkpoint);
const { inChannels: C } = model.config, [S] = model.imageSize; // the digit models are square

function post(message: FromWorker): void {
  port.postMessage(message);
}

function softmax(logits: Float32Array): number[] {
  const max = Math.max(...logits);
  const e = Array.from(logits, (v) => Math.exp(v - max));
  const sum = e.reduce((a, b) => a + b, 0);
  return e.map((v) => v / sum);
}

function argmax(values: number[]): number {
  return values.reduce((best, v, i) => (v > values[best] ? i : best), 0);
}

/** Classifies a batch; a PNG that does not decode gets a Refusal, the others one forward. */
function predict(items: ToWorker['items']): (Prediction | Refusal)[] {
  const results: (Prediction | Refusal)[] = [];
  const good: { id: number; digit: Float32Array }[] = [];
  for (const { id, png } of items) {
    try {
      good.push({ id, digit: pngToDigit(png, S) });
    } catch (e) {
      if (!(e instanceof HttpError)) throw e;
      results.push({ id, status: e.status, code: e.code, message: e.message });
    }
  }
  if (good.length === 0) return results;
  using images = digitBatch(good.map((g) => g.digit), S, C);
  using logits = model.forward(images);
  const K = logits.shape[1];
  good.forEach(({ id }, b) => {
    const probabilities = softmax(logits.data.subarray(b * K, (b + 1) * K));
    results.push({ id, label: argmax(probabilities), probabilities });
  });
  return results;
}

port.on('message', (msg: ToWorker) => {
  if (msg.type !== 'predict') return;
  let results: (Prediction | Refusal)[];
  try {
    results = predict(msg.items);
  } catch (e) {
    // Not the client's fault (e.g. out of memory): a 500 for each image, and the worker lives on.
    const message = `Inference failed: ${(e as Error).message}`;
    results = msg.items.map(({ id }) => ({ id, status: 500, code: 'inference_failed', message }));
  }
  post({ type: 'results', results });
});

post({ type: 'ready', model: { imgSize: S, inChannels: C, numClasses: model.numClasses,
  parameters: model.parameters().reduce((n, p) => n + p.size, 0) } });
