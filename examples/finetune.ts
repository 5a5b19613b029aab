/**
 * Fine-tuning a pretrained ViT on a new task at a new resolution, the way one adapts a timm
 * checkpoint: a ViTClassifier is first trained on the digits 0-4 at 28×28 (the "pretrained"
 * model; a timm file loaded with fromTimm/loadTimm takes its place the same way), then
 *   1. rebuilt for 42×42 digits, its position table resampled to the 6×6 patch grid
 *      (resamplePosEmbed, timm's resample_abs_pos_embed),
 *   2. given a new head for the digits 5-9 (resetClassifier),
 *   3. frozen except for the last `trainBlocks` blocks, the final norm and the head
 *      (Module.requiresGrad / Parameter.requiresGrad),
 *   4. fine-tuned with AdamW over timm-style parameter groups (paramGroups: no decay for biases,
 *      norms and embeddings; layer-wise learning-rate decay), with gradient accumulation;
 * and its test accuracy on 5-9 is reported before and after, beside a model of the same shape
 * trained from scratch with the same number of steps.
 *
 *   npm run example:finetune -- [--pretrain-epochs N] [--epochs N] [--train-size N] [--test-size N] [--train-blocks N] [--seed N]
 */
import { parseArgs } from 'node:util';

import { AdamW, paramGroups, resamplePosEmbed, Tensor, trainStepAsync, ViTClassifier, type ViTClassifierConfig } from '../lib';
import { allDigits, type Digits, DIGIT_SIZE, imageBatch, labelBatch, permutation, subset } from '../lib/cli/mnist';
import { Random } from '../lib/core/random';

/** The pretrained model's shape (the new one differs only in imgSize and the head). */
const MODEL: ViTClassifierConfig = { imgSize: DIGIT_SIZE, patchSize: 7, inChannels: 1, dModel: 64, numHeads: 4, dFF: 128, depth: 4, numClasses: 5 };
/** The fine-tuning resolution: 42×42 digits, a 6×6 grid of 7×7 patches (the pretrained grid is 4×4). */
const NEW_SIZE = 42;

export interface FinetuneOptions {
  pretrainEpochs: number;
  epochs: number;
  /** Digits per task for training (each task's test digits are kept apart). */
  trainSize: number;
  testSize: number;
  /** Blocks left trainable, counted from the last. */
  trainBlocks: number;
  batchSize: number;
  seed: number;
}
export const FINETUNE_DEFAULTS: FinetuneOptions = { pretrainEpochs: 6, epochs: 2, trainSize: 4000, testSize: 900, trainBlocks: 2, batchSize: 32, seed: 0 };

export interface FinetuneResult {
  /** Test accuracy on 0-4 of the pretrained model. */
  pretrained: number;
  /** Test accuracy on 5-9 of the fine-tuned model before fine-tuning (new head) and after. */
  before: number;
  after: number;
  /** Test accuracy on 5-9 of the same architecture trained from scratch with the same steps. */
  scratch: number;
  /** Trainable and total parameters during fine-tuning. */
  trainable: number;
  total: number;
}

/** The digits of `labels` (relabelled 0…), shuffled, split into train and test. */
function task(labels: number[], o: FinetuneOptions, rng: Random): { train: Digits; test: Digits } {
  const all = allDigits();
  const picked = Int32Array.from(permutation(all.count, rng).filter((i) => labels.includes(all.labels[i])));
  const digits = subset(all, picked);
  digits.labels = digits.labels.map((l) => labels.indexOf(l));
  return { train: subset(digits, Int32Array.from({ length: o.trainSize }, (_, i) => i)),
    test: subset(digits, Int32Array.from({ length: o.testSize }, (_, i) => o.trainSize + i)) };
}

/** Bilinear resize of a normalised batch [n, 1, S, S] to [n, 1, size, size] (align_corners false). */
function resize(batch: Tensor<'float32'>, size: number): Tensor<'float32'> {
  const [n, , S] = batch.shape, src = batch.data, out = new Float32Array(n * size * size), scale = S / size;
  const tap = (v: number) => Math.min(Math.max((v + 0.5) * scale - 0.5, 0), S - 1);
  for (let b = 0; b < n; b++)
    for (let y = 0; y < size; y++)
      for (let x = 0; x < size; x++) {
        const sy = tap(y), sx = tap(x), y0 = Math.floor(sy), x0 = Math.floor(sx), y1 = Math.min(y0 + 1, S - 1), x1 = Math.min(x0 + 1, S - 1);
        const fy = sy - y0, fx = sx - x0, p = (yy: number, xx: number) => src[b * S * S + yy * S + xx];
        out[(b * size + y) * size + x] = (1 - fy) * ((1 - fx) * p(y0, x0) + fx * p(y0, x1)) + fy * ((1 - fx) * p(y1, x0) + fx * p(y1, x1));
      }
  return Tensor.from(out, [n, 1, size, size]);
}

const indices = (from: number, to: number) => Int32Array.from({ length: to - from }, (_, i) => from + i);

function images(d: Digits, idx: Int32Array, size: number, rng?: Random): Tensor<'float32'> {
  const batch = imageBatch(d, idx, rng ? { rng, maxShift: 2 } : undefined);
  if (size === DIGIT_SIZE) return batch;
  const big = resize(batch, size);
  batch.dispose();
  return big;
}

/** Test accuracy of `model` on `d` at `size`. */
function accuracy(model: ViTClassifier, d: Digits, size: number): number {
  model.eval();
  let right = 0;
  for (let i = 0; i < d.count; i += 200) {
    const idx = indices(i, Math.min(i + 200, d.count));
    const x = images(d, idx, size), logits = model.forward(x).data, C = model.numClasses;
    for (let r = 0; r < idx.length; r++) {
      let best = 0;
      for (let c = 1; c < C; c++) if (logits[r * C + c] > logits[r * C + best]) best = c;
      if (best === d.labels[idx[r]]) right++;
    }
    x.dispose();
  }
  model.train();
  return right / d.count;
}

/** Trains `model` for `epochs` over `d` with `opt`; returns the number of optimizer steps. */
async function train(model: ViTClassifier, opt: AdamW, d: Digits, size: number, epochs: number, o: FinetuneOptions, accumulate = 1): Promise<number> {
  const rng = new Random(o.seed + 7);
  const micro = Math.floor(o.batchSize / accumulate);
  let steps = 0;
  for (let e = 0; e < epochs; e++) {
    const order = permutation(d.count, rng);
    for (let i = 0; i + o.batchSize <= d.count; i += o.batchSize) {
      for (let k = 0; k < accumulate; k++) {
        const idx = order.subarray(i + k * micro, i + (k + 1) * micro);
        const x = images(d, idx, size, rng), y = labelBatch(d, idx);
        await trainStepAsync(model, opt, x, y, { accumulate });
        x.dispose();
        y.dispose();
      }
      steps++;
    }
  }
  return steps;
}

/** Runs the whole example (see the file's header); logs each stage through `log`. */
export async function runFinetune(o: FinetuneOptions, log: (line: string) => void = console.log): Promise<FinetuneResult> {
  const rng = new Random(o.seed);
  const oldTask = task([0, 1, 2, 3, 4], o, rng), newTask = task([5, 6, 7, 8, 9], o, rng);

  const pretrained = new ViTClassifier({ ...MODEL, seed: o.seed });
  await train(pretrained, new AdamW(pretrained.parameters(), { lr: 2e-3 }), oldTask.train, DIGIT_SIZE, o.pretrainEpochs, o);
  const pretrainedAcc = accuracy(pretrained, oldTask.test, DIGIT_SIZE);
  log(`pretrained on 0-4 at ${DIGIT_SIZE}×${DIGIT_SIZE}: test accuracy ${(100 * pretrainedAcc).toFixed(1)}%`);

  // 1. The same weights at 42×42: every parameter but the position table carries over as it is.
  const model = new ViTClassifier({ ...MODEL, imgSize: NEW_SIZE, seed: o.seed + 1 });
  const grid = MODEL.imgSize as number / MODEL.patchSize!, newGrid = NEW_SIZE / MODEL.patchSize!;
  const weights = pretrained.stateDict();
  const pos = resamplePosEmbed(weights.pos_embed as Tensor<'float32'>, { oldSize: [grid, grid], newSize: [newGrid, newGrid] });
  model.loadStateDict({ ...weights, pos_embed: pos });
  pos.dispose();
  pretrained.dispose();
  // 2. A new head for the new classes; 3. only the last blocks, the final norm and the head train.
  model.resetClassifier(5, { seed: o.seed + 2 });
  model.requiresGrad(false);
  const depth = MODEL.depth!;
  for (const [name, p] of model.namedParameters())
    if (name.startsWith('head.') || name.startsWith('norm.') || Array.from({ length: o.trainBlocks }, (_, i) => `blocks.${depth - 1 - i}.`).some((b) => name.startsWith(b)))
      p.requiresGrad = true;
  const trainable = model.parameters().filter((p) => p.requiresGrad).reduce((n, p) => n + p.size, 0);
  const total = model.parameters().reduce((n, p) => n + p.size, 0);
  const before = accuracy(model, newTask.test, NEW_SIZE);
  log(`fine-tuning on 5-9 at ${NEW_SIZE}×${NEW_SIZE} (pos_embed resampled ${grid}×${grid} → ${newGrid}×${newGrid}, new head, ` +
    `${trainable.toLocaleString('en-US')} of ${total.toLocaleString('en-US')} parameters trainable): before ${(100 * before).toFixed(1)}%`);
  // 4. timm's groups (no decay for biases and norms; layer-wise decay 0.75), two micro-batches per step.
  const opt = new AdamW(paramGroups(model, { layerDecay: 0.75, weightDecay: 0.05 }), { lr: 3e-3 });
  const steps = await train(model, opt, newTask.train, NEW_SIZE, o.epochs, o, 2);
  const after = accuracy(model, newTask.test, NEW_SIZE);
  log(`after ${steps} steps: ${(100 * after).toFixed(1)}%`);

  const scratch = new ViTClassifier({ ...MODEL, imgSize: NEW_SIZE, seed: o.seed + 3 });
  await train(scratch, new AdamW(scratch.parameters(), { lr: 2e-3 }), newTask.train, NEW_SIZE, o.epochs, o);
  const scratchAcc = accuracy(scratch, newTask.test, NEW_SIZE);
  log(`the same architecture from scratch, same steps, every parameter trained: ${(100 * scratchAcc).toFixed(1)}%`);
  model.dispose();
  scratch.dispose();
  return { pretrained: pretrainedAcc, before, after, scratch: scratchAcc, trainable, total };
}

if (require.main === module) {
  const { values: v } = parseArgs({
    options: {
      'pretrain-epochs': { type: 'string' }, epochs: { type: 'string' }, 'train-size': { type: 'string' }, 'test-size': { type: 'string' },
      'train-blocks': { type: 'string' }, seed: { type: 'string' },
    },
  });
  const int = (s: string | undefined, d: number, name: string) => {
    if (s === undefined) return d;
    const n = Number(s);
    if (!Number.isInteger(n) || n < 0) throw new Error(`Expected a non-negative integer for --${name} but received ${s}`);
    return n;
  };
  const d = FINETUNE_DEFAULTS;
  runFinetune({
    ...d, pretrainEpochs: int(v['pretrain-epochs'], d.pretrainEpochs, 'pretrain-epochs'), epochs: int(v.epochs, d.epochs, 'epochs'),
    trainSize: int(v['train-size'], d.trainSize, 'train-size'), testSize: int(v['test-size'], d.testSize, 'test-size'),
    trainBlocks: int(v['train-blocks'], d.trainBlocks, 'train-blocks'), seed: int(v.seed, d.seed, 'seed'),
  }).catch((e: unknown) => {
    console.error(e);
    process.exitCode = 1;
  });
}
