/**
 * The inference thread: loads the checkpoint once, then for each batch of posted PNGs decodes
 * and normalises them as the demo's training does, runs one forward over the valid ones and answers with softmax probabilities. All the CPU
 * work of a prediction happens here, so the HTTP thread's event loop stays free.
 */
import { parentPort, workerData } from 'node:worker_threads';

import { MNIST_MEAN, MNIST_STD } from '../../lib/cli/mnist';
import { Tensor } from '../../lib/index';
import { loadClassifier } from './checkpoint';
import { HttpError } from './http_error';
import { pngToGray } from './image';
import type { FromWorker, Prediction, Refusal, ToWorker, WorkerInit } from './protocol';

const port = parentPort!;
const { checkpoint } = workerData as WorkerInit;
// A checkpoint that cannot be loaded throws here: the worker's 'error' event tells the HTTP thread.
const model = loadClassifier(checkpoint);
const { imgSize: S, inChannels: C } = model.config;

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
  const good: { id: number; gray: Float32Array }[] = [];
  for (const { id, png } of items) {
    try {
      good.push({ id, gray: pngToGray(png, S) });
    } catch (e) {
      if (!(e instanceof HttpError)) throw e;
      results.push({ id, status: e.status, code: e.code, message: e.message });
    }
  }
  if (good.length === 0) return results;
  const input = new Float32Array(good.length * C * S * S);
  // The demo trains on pixels normalised with MNIST's mean and standard deviation: the same here.
  good.forEach(({ gray }, b) => {
    for (let c = 0; c < C; c++) input.set(gray.map((v) => (v - MNIST_MEAN) / MNIST_STD), (b * C + c) * S * S);
  });
  using images = Tensor.from(input, [good.length, C, S, S]);
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
