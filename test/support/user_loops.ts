/**
 * Loops written the way users write them, for the memory test (test/user_loops.test.ts), run as a
 * child process (bundled) with --expose-gc:
 *   node --expose-gc user_loops.js <loop> <iterations> <sampleEvery> <README.md path>
 * Loops:
 *   readme-train        the README's "Train a ViT in a dozen lines" code block, as written
 *                       (synchronous, nothing disposed, never yields) on a small model
 *   readme-train-async  the same loop through forwardAsync / backwardAsync / stepAsync
 *   infer               `model.forward(x)` in a plain for loop, nothing disposed, never yields
 *   infer-async         `await model.forwardAsync(x)`, nothing disposed
 *   from-dispose        `Tensor.from(...)` then `dispose()`, synchronous
 * Every `sampleEvery` iterations it records the RSS after a full GC. It prints one JSON line:
 * the samples, the warm-up floor (lowest sample in the second and third tenths of the run), the
 * end floor (lowest sample in the last three tenths), their ratio minus one, and the run's time.
 * Floors over tenths, not the last few samples: the RSS after a full GC steps up and down by ~5 MiB
 * for several samples at a time (the async loops, before and after 2026-11-26's changes alike: e.g.
 * 98.7, then 103.7, 104.1, 104.2 MiB as the last three), which a leak does not undo; a leak still
 * lifts every sample of the last tenths.
 */
import * as fs from 'node:fs';

import * as nf from '../../lib';
import { Random } from '../../lib/core/random';

const [loop, iterationsArg, everyArg, readmePath] = process.argv.slice(2);
const iterations = Number(iterationsArg), every = Number(everyArg);
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with --expose-gc');

/** The small model of issue 11's measurements: 16² images, patch 4, width 32, 4 heads, dFF 64, depth 2. */
const small = { imgSize: 16, patchSize: 4, inChannels: 1, numClasses: 10, dModel: 32, numHeads: 4, dFF: 64, depth: 2, seed: 1 };
const B = 8;
const rng = new Random(7);
const samples: { at: number; rssMiB: number }[] = [];
let count = 0;

function sample(): void {
  gc!();
  gc!();
  samples.push({ at: count, rssMiB: process.memoryUsage().rss / 2 ** 20 });
}

/** One batch of random images and labels; counts iterations and samples the RSS every `every`. */
function nextBatch(): { images: Float32Array; labels: Int32Array } {
  if (count % every === 0) sample();
  count++;
  return { images: rng.normalArray(B * small.imgSize ** 2, 1), labels: Int32Array.from({ length: B }, () => rng.u32() % 10) };
}

/**
 * The README's training example, from README.md itself: the code block after "## Train a ViT in
 * a dozen lines", with only its model config, image size and step counts replaced (each exactly
 * once, so an edit of the README that changes them fails here loudly), run with `nextBatch` above.
 */
function readmeTrainingLoop(steps: number): () => void {
  const readme = fs.readFileSync(readmePath, 'utf8');
  const block = /## Train a ViT in a dozen lines\s+```js\n([\s\S]*?)```/.exec(readme);
  if (!block) throw new Error('README.md has no "Train a ViT in a dozen lines" code block');
  let code = block[1];
  const replace = (pattern: RegExp, by: string) => {
    const hits = code.match(new RegExp(pattern.source, 'g'))?.length ?? 0;
    if (hits !== 1) throw new Error(`README training example: expected ${pattern} once, found it ${hits} times`);
    code = code.replace(pattern, by);
  };
  replace(/new ViTClassifier\(\{[^}]*\}\)/, `new ViTClassifier(${JSON.stringify(small)})`);
  replace(/1, 28, 28\]/, `1, ${small.imgSize}, ${small.imgSize}]`);
  replace(/totalSteps: 2000/, `totalSteps: ${steps}`);
  replace(/step <= 2000/, `step <= ${steps}`);
  const requireNodeformer = (name: string) => {
    if (name !== 'nodeformer') throw new Error(`README example requires ${name}`);
    return nf;
  };
  return new Function('require', 'nextBatch', code).bind(null, requireNodeformer, nextBatch) as () => void;
}

async function readmeTrainAsync(steps: number): Promise<void> {
  const { ViTClassifier, AdamW, crossEntropy, cosineWithWarmup, Tensor } = nf;
  const model = new ViTClassifier(small);
  const opt = new AdamW(model.parameters(), { lr: 1e-3, weightDecay: 0.05 });
  const lr = cosineWithWarmup({ lr: 1e-3, warmupSteps: 100, totalSteps: steps });
  for (let step = 1; step <= steps; step++) {
    const { images, labels } = nextBatch();
    const logits = await model.forwardAsync(Tensor.from(images, [labels.length, 1, small.imgSize, small.imgSize]));
    const { grad } = crossEntropy(logits, Tensor.from(labels, [labels.length]));
    opt.zeroGrad();
    await model.backwardAsync(grad);
    opt.options.lr = lr(step);
    await opt.stepAsync();
  }
}

function evalModel(): nf.ViTClassifier {
  const model = new nf.ViTClassifier(small);
  model.eval();
  return model;
}

function infer(calls: number): void {
  const model = evalModel();
  for (let i = 0; i < calls; i++) {
    const { images } = nextBatch();
    model.forward(nf.Tensor.from(images, [B, 1, small.imgSize, small.imgSize]));
  }
}

async function inferAsync(calls: number): Promise<void> {
  const model = evalModel();
  for (let i = 0; i < calls; i++) {
    const { images } = nextBatch();
    await model.forwardAsync(nf.Tensor.from(images, [B, 1, small.imgSize, small.imgSize]));
  }
}

function fromDispose(calls: number): void {
  const data = rng.normalArray(B * small.imgSize ** 2, 1);
  for (let i = 0; i < calls; i++) {
    nextBatch();
    nf.Tensor.from(data, [B, 1, small.imgSize, small.imgSize]).dispose();
  }
}

async function main(): Promise<void> {
  const t0 = Date.now();
  if (loop === 'readme-train') readmeTrainingLoop(iterations)();
  else if (loop === 'readme-train-async') await readmeTrainAsync(iterations);
  else if (loop === 'infer') infer(iterations);
  else if (loop === 'infer-async') await inferAsync(iterations);
  else if (loop === 'from-dispose') fromDispose(iterations);
  else throw new Error(`unknown loop ${loop}`);
  sample();
  const seconds = (Date.now() - t0) / 1000;
  const floor = (from: number, to: number) =>
    Math.min(...samples.filter((s) => s.at >= from && s.at <= to).map((s) => s.rssMiB));
  const warm = floor(0.1 * iterations, 0.3 * iterations);
  const end = floor(0.7 * iterations, iterations);
  console.log(JSON.stringify({ loop, iterations, seconds, warmMiB: warm, endMiB: end, growth: end / warm - 1, samples }));
}

void main();
