/**
 * A long training and inference loop for leak checks, run as a child process (bundled) by
 * test/leaks.test.ts and under valgrind by scripts/leak_check.sh. Usage:
 *   node --expose-gc leak_loop.js <trainSteps> <inferCalls> [warmupSteps]
 * Half the calls go through the synchronous API and half through the asynchronous one; half the
 * outputs are disposed explicitly and half left to the GC; some tensors are disposed
 * while an asynchronous op still uses them. Prints one JSON line with the RSS before (after the
 * warm-up) and after the measured loop, each the floor of five samples taken after a full GC.
 */
import { AdamW, native, Tensor, trainStep, trainStepAsync, ViTClassifier } from '../../lib';
import { Random } from '../../lib/core/random';

const [trainSteps, inferCalls, warmup] = process.argv.slice(2).map(Number);
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with --expose-gc');

const model = new ViTClassifier({ imgSize: 8, patchSize: 4, inChannels: 1, numClasses: 4, dModel: 32, numHeads: 4, dFF: 64,
  depth: 2, dropout: 0.1, seed: 1 });
const opt = new AdamW(model.parameters(), { lr: 1e-3 });
const rng = new Random(2), B = 4;
const batch = () => ({
  images: Tensor.from(rng.normalArray(B * 64, 1), [B, 1, 8, 8]),
  labels: Tensor.from(Int32Array.from({ length: B }, () => rng.u32() % 4), [B]),
});

async function train(steps: number): Promise<number> {
  model.train();
  let loss = 0;
  for (let s = 0; s < steps; s++) {
    const { images, labels } = batch();
    loss = s % 2 ? await trainStepAsync(model, opt, images, labels) : trainStep(model, opt, images, labels);
    if (s % 4 < 2) {
      images.dispose();
      labels.dispose();
    }
  }
  return loss;
}

async function infer(calls: number): Promise<void> {
  model.eval();
  for (let i = 0; i < calls; i++) {
    const { images } = batch();
    const logits = i % 2 ? await model.forwardAsync(images) : model.forward(images);
    if (i % 4 < 2) logits.dispose();
  }
}

/** An op in flight on tensors disposed at once: their memory must outlive the op (valgrind checks it). */
async function disposeInFlight(times: number): Promise<void> {
  for (let i = 0; i < times; i++) {
    const rows = 64, D = 32;
    const x = Tensor.from(rng.normalArray(rows * D, 1), [rows, D]), out = Tensor.zeros([rows, D]);
    const gamma = Tensor.zeros([D]), beta = Tensor.zeros([D]);
    const p = native.layernormForwardAsync({ rows, D, out: out.data, mean: new Float32Array(rows), rstd: new Float32Array(rows),
      x: x.data, gamma: gamma.data, beta: beta.data });
    for (const t of [x, out, gamma, beta]) t.dispose();
    await p;
  }
}

function rss(): number {
  gc!();
  gc!();
  return process.memoryUsage().rss;
}

/**
 * The lowest of five post-GC RSS samples, each after a few more steps: the floor that a leak
 * raises. One sample alone swings by about ±7 MiB (~8%) from run to run with the page state of
 * malloc's arenas and V8's heap, in both directions, which no loop length changes.
 */
async function rssFloor(): Promise<number> {
  let low = Infinity;
  for (let i = 0; i < 5; i++) {
    await train(10);
    await infer(10);
    low = Math.min(low, rss());
  }
  return low;
}

async function main(): Promise<void> {
  await train(warmup);
  await infer(warmup);
  await disposeInFlight(20);
  const before = await rssFloor();
  const buffersBefore = process.memoryUsage().arrayBuffers;
  const t0 = Date.now();
  let peak = before;
  const lossBefore = await train(0);
  let lastLoss = lossBefore;
  for (let done = 0; done < trainSteps; done += 100) {
    lastLoss = await train(Math.min(100, trainSteps - done));
    peak = Math.max(peak, process.memoryUsage().rss);
  }
  for (let done = 0; done < inferCalls; done += 250) {
    await infer(Math.min(250, inferCalls - done));
    peak = Math.max(peak, process.memoryUsage().rss);
  }
  await disposeInFlight(20);
  const after = await rssFloor();
  const buffersAfter = process.memoryUsage().arrayBuffers;
  model.dispose();
  opt.dispose();
  console.log(JSON.stringify({ trainSteps, inferCalls, warmup, before, after, peak, growth: (after - before) / before,
    lastLoss, seconds: (Date.now() - t0) / 1000, arrayBuffers: [buffersBefore, buffersAfter] }));
}

void main();
