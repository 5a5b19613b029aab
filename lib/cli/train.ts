/**
 * The demo: trains a ViTClassifier on the MNIST digits of the `mnist` package on the command
 * line's one training path (lib/cli/training: fit() with AdamW, a cosine schedule with warmup, a
 * progress bar, validation on the test digits, the best epoch kept, and with --logdir TensorBoard,
 * here with the attention grid each epoch), then draws its pictures (training curves, attention
 * over test digits, the sinusoidal position table) beside the checkpoint.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

import type { Callback, EpochLogs } from '../training/callbacks';
import { DistributedDataParallel } from '../distributed/ddp';
import * as distributed from '../distributed/collectives';
import { positiveInt } from '../validation/values';
import { ViTClassifier, type ViTClassifierConfig } from '../models/vit';
import { native } from '../native/addon';
import { Random } from '../core/random';
import { DistributedSampler } from '../distributed/sampler';
import type { SummaryWriter } from '../io/tensorboard';
import { argmaxRows, evaluate } from './classify';
import { deviceBatches, type SizedSource } from './device_batches';
import { digitPng } from './images';
import { DIGIT_PIXELS, type Digits, imageBatch, labelBatch, loadMnist, permutation } from './mnist';
import { attentionGridSpec, type AttentionSample, type EpochRecord, heatmapSpec, renderChart, trainingCurvesSpec, writeChart } from './plots';
import { percent, runTraining, type RunData, type RunOptions } from './training';

/** The demo's model: 7×7 patches (16 tokens and CLS), width 64, 4 pre-LN blocks. */
export const DEMO_MODEL: ViTClassifierConfig = {
  imgSize: 28, patchSize: 7, inChannels: 1, numClasses: 10, dModel: 64, numHeads: 4, dFF: 128, depth: 4,
};

/** Options of the demo's training run (the command line's flags). */
export interface TrainOptions extends RunOptions {
  trainSize: number;
  testSize: number;
  /**
   * Data-parallel over the ranks of an MPI job (`mpirun -np N nodeformer train --distributed`): each
   * rank reads its DistributedSampler share with batches of batchSize (global batch batchSize × N),
   * gradients are averaged by DistributedDataParallel, rank 0 logs, evaluates and writes the outputs.
   */
  distributed?: boolean;
}

/** Training defaults: the numbers behind `npm run demo`. */
export const TRAIN_DEFAULTS = { epochs: 12, batchSize: 32, lr: 3e-3, seed: 0, trainSize: 8000, testSize: 2000, out: 'nodeformer-demo' };
const MAX_SHIFT = 1;
const EVAL_BATCH = 250;
/** Test digits in the attention grid that TensorBoard shows each epoch. */
const TENSORBOARD_GRID = 12;

/** What a run measured and wrote. */
export interface TrainResult {
  history: EpochRecord[];
  testAccuracy: number;
  seconds: number;
  imagesPerSecond: number;
  files: string[];
}

/** What the demo trains and validates on. */
interface DigitData extends RunData {
  /** Training samples per epoch on this rank. */
  samplesPerEpoch: number;
  /** Training samples per epoch over all ranks. */
  globalSamplesPerEpoch: number;
  /** The test digits (the validation set; the pictures are drawn from them). */
  test: Digits;
}

/**
 * CPU batches of the `count` digits of `digits` that `order(epoch)` picks, in its order, shifted
 * at random when `augment` is given.
 */
function digitBatches(digits: Digits, count: number, batchSize: number, order: (epoch: number) => ArrayLike<number>,
  augment?: { rng: Random; maxShift: number }): SizedSource {
  let epoch = 0;
  return {
    length: Math.ceil(count / batchSize),
    setEpoch: (e) => void (epoch = e),
    *[Symbol.iterator]() {
      const idx = order(epoch);
      for (let start = 0; start < idx.length; start += batchSize) {
        const part = Array.prototype.slice.call(idx, start, start + batchSize) as number[];
        yield { input: imageBatch(digits, part, augment), target: labelBatch(digits, part) };
      }
    },
  };
}

/** The MNIST split of the demo: this rank's share of the training digits (a seeded reshuffle per epoch) and the test digits. */
function mnistData(o: TrainOptions, rank: number): DigitData {
  const { train, test } = loadMnist({ trainSize: o.trainSize, testSize: o.testSize });
  const device = o.device ?? 'cpu', rng = new Random(o.seed + 1 + rank);
  const sampler = o.distributed ? new DistributedSampler(train.count, { seed: o.seed }) : null;
  const order = (epoch: number) => {
    if (!sampler) return permutation(train.count, rng);
    sampler.setEpoch(epoch);
    return sampler.indices();
  };
  const all = Int32Array.from({ length: test.count }, (_, i) => i);
  const samplesPerEpoch = sampler ? sampler.numSamples : train.count;
  return {
    train: deviceBatches(digitBatches(train, samplesPerEpoch, o.batchSize, order, { rng, maxShift: MAX_SHIFT }), device),
    validation: deviceBatches(digitBatches(test, test.count, EVAL_BATCH, () => all), device),
    description: `${train.count} MNIST digits, testing on ${test.count}`,
    validationName: 'test',
    samplesPerEpoch,
    globalSamplesPerEpoch: sampler ? sampler.totalSize : train.count,
    test,
  };
}

/** The demo's picture of an epoch log (the training-curves chart). */
function epochRecord(h: EpochLogs): EpochRecord {
  return { epoch: h.epoch, trainLoss: h.loss, trainAccuracy: h.accuracy ?? NaN, testLoss: h.valLoss ?? NaN, testAccuracy: h.valAccuracy ?? NaN };
}

/** A callback adding the attention grid over the first test digits, with the model's predictions, to TensorBoard after each epoch. */
function attentionImages(writer: SummaryWriter, model: ViTClassifier, test: Digits): Callback {
  const chosen = Array.from({ length: Math.min(TENSORBOARD_GRID, test.count) }, (_, i) => i);
  return {
    async onEpochEnd(logs) {
      const batch = imageBatch(test, chosen).moveTo(model.device);
      const mode = model.training;
      const logits = model.eval().forward(batch);
      model.train(mode);
      const predicted = argmaxRows(logits.toArray(), model.numClasses).map((p) => p.label);
      logits.dispose();
      batch.dispose();
      const samples = attentionSamples(model, test, chosen, predicted);
      writer.addImage('attention', await renderChart(attentionGridSpec(samples, 6, `Test digits after epoch ${logs.epoch}`)), logs.epoch);
    },
  };
}

/** Trains the demo model, saves it and draws its pictures into `o.out`. */
export async function trainDemo(o: TrainOptions): Promise<TrainResult> {
  positiveInt('epochs', o.epochs);
  if (o.distributed) await distributed.init();
  const rank = distributed.rank(), world = distributed.worldSize(), lead = rank === 0;
  const data = mnistData(o, rank);
  const model = new ViTClassifier({ ...DEMO_MODEL, seed: o.seed }).to(o.device ?? 'cpu');
  if (lead && world > 1) o.log(`Distributed: ${world} ranks (MPI), ${o.batchSize} images per rank and step (global batch ${o.batchSize * world}), ` +
    `${data.samplesPerEpoch} training digits per rank and epoch`);
  const run = await runTraining(model, data, o, {
    net: o.distributed ? new DistributedDataParallel(model) : undefined, world, lead,
    hparams: { lr: o.lr, batchSize: o.batchSize, epochs: o.epochs, seed: o.seed, trainSize: o.trainSize },
    images: (writer) => attentionImages(writer, model, data.test),
  });
  const trainSeconds = run.history.reduce((s, h) => s + h.seconds, 0);
  const final = evaluate(model, data.test, EVAL_BATCH);
  // Rank 0 draws the pictures; the others wait for it (onRank0), then all leave together.
  const records = run.history.map(epochRecord);
  const written = await distributed.onRank0(async () => ({
    files: [run.file, ...await writeOutputs(model, data.test, final.predicted, records, o.out)], samples: writeSamples(data.test, path.join(o.out, 'samples')),
  }), 'writing the outputs');
  if (o.distributed) await distributed.finalize();
  model.dispose();
  if (!written) // ranks other than 0: their own share's throughput
    return { history: records, testAccuracy: final.accuracy, seconds: run.seconds, imagesPerSecond: (o.epochs * data.samplesPerEpoch) / trainSeconds, files: [] };
  const { files, samples } = written;
  const imagesPerSecond = (run.history.length * data.globalSamplesPerEpoch) / trainSeconds;
  const kept = run.bestEpoch === run.history.length ? '' : ` (the model of epoch ${run.bestEpoch}, the lowest test loss)`;
  o.log(`Test accuracy ${percent(final.accuracy)} (${Math.round(final.accuracy * data.test.count)}/${data.test.count})${kept} after ` +
    `${o.epochs} epoch${o.epochs === 1 ? '' : 's'} in ${run.seconds.toFixed(1)} s (${imagesPerSecond.toFixed(0)} training images/s); ` +
    `wrote ${files.map((f) => path.basename(f)).join(', ')} and ${samples.length} sample digits (samples/digit-<label>.png) to ${o.out}` +
    (o.logdir ? `; TensorBoard logs in ${o.logdir}` : ''));
  return { history: records, testAccuracy: final.accuracy, seconds: run.seconds, imagesPerSecond, files: [...files, ...samples] };
}

/** Test digits for the attention picture: the first ones, with up to a quarter of the grid kept for mistakes. */
function pickSamples(test: Digits, predicted: Int32Array, count: number): number[] {
  const wrong = [...predicted.keys()].filter((i) => predicted[i] !== test.labels[i]).slice(0, Math.floor(count / 4));
  const right = [...predicted.keys()].filter((i) => predicted[i] === test.labels[i]).slice(0, count - wrong.length);
  return [...right, ...wrong].sort((a, b) => a - b);
}

/**
 * The test digits at `chosen`, each with its prediction (`predicted[k]` for `chosen[k]`) and the
 * CLS token's attention to each patch in the last block (mean over heads).
 */
function attentionSamples(model: ViTClassifier, test: Digits, chosen: number[], predicted: ArrayLike<number>): AttentionSample[] {
  const batch = imageBatch(test, chosen).moveTo(model.device);
  const maps = model.attentionMaps(batch);
  batch.dispose();
  const last = maps[maps.length - 1], weights = last.toArray();
  for (const m of maps) m.dispose();
  const [, H, T] = last.shape;
  return chosen.map((i, b) => {
    const attention = new Float32Array(T - 1);
    for (let h = 0; h < H; h++)
      for (let k = 1; k < T; k++) attention[k - 1] += weights[((b * H + h) * T) * T + k] / H;
    return { pixels: test.pixels.slice(i * DIGIT_PIXELS, (i + 1) * DIGIT_PIXELS), label: test.labels[i], predicted: predicted[b], attention };
  });
}

/** Draws the pictures of the trained model; returns the paths written. */
async function writeOutputs(model: ViTClassifier, test: Digits, predicted: Int32Array, history: EpochRecord[], out: string): Promise<string[]> {
  const files = { curves: path.join(out, 'training-curves.png'), attention: path.join(out, 'attention.png'),
    positions: path.join(out, 'positional-encoding.png') };
  await writeChart(files.curves, trainingCurvesSpec(history));

  const chosen = pickSamples(test, predicted, 24);
  const samples = attentionSamples(model, test, chosen, chosen.map((i) => predicted[i]));
  const shownWrong = samples.filter((s) => s.label !== s.predicted).length;
  const allWrong = predicted.filter((p, i) => p !== test.labels[i]).length;
  await writeChart(files.attention, attentionGridSpec(samples, 6,
    `${samples.length} test digits and their predictions (in red: ${shownWrong} of the ${allWrong} mistakes on ${test.count} test digits)`));

  const D = model.config.dModel, len = 64, table = new Float32Array(len * D);
  native.sinusoidalEncoding({ len, D, out: table });
  await writeChart(files.positions, heatmapSpec(table, len, D, {
    title: `Sinusoidal positional encoding (${len} positions × ${D} dimensions)`,
    subtitle: 'PE[p, 2i] = sin(p / 10000^(2i/D)),  PE[p, 2i+1] = cos(p / 10000^(2i/D))',
    x: 'dimension', y: 'position', value: 'value',
  }));
  return Object.values(files);
}

/** The first test digit of each class as samples/digit-<label>.png, to try `nodeformer predict` on. */
function writeSamples(test: Digits, dir: string): string[] {
  fs.mkdirSync(dir, { recursive: true });
  const written: string[] = [];
  for (let label = 0; label < 10; label++) {
    const i = test.labels.indexOf(label);
    if (i < 0) continue;
    const file = path.join(dir, `digit-${label}.png`);
    fs.writeFileSync(file, digitPng(test.pixels.subarray(i * DIGIT_PIXELS, (i + 1) * DIGIT_PIXELS)));
    written.push(file);
  }
  return written;
}
