/**
 * The demo: trains a ViTClassifier on the MNIST digits of the `mnist` package with AdamW and a
 * cosine schedule with warmup, shows a progress bar per epoch, and writes the checkpoint and its
 * pictures (training curves, attention over test digits, the sinusoidal position table).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { setImmediate as yieldToLoop } from 'node:timers/promises';

import { SingleBar } from 'cli-progress';

import { DistributedDataParallel } from '../ddp';
import type { Device } from '../device';
import * as distributed from '../distributed';
import { DistributedSampler } from '../sampler';
import { positiveInt } from '../layers/common';
import { crossEntropy } from '../losses';
import { ViTClassifier, type ViTClassifierConfig } from '../models/vit';
import { native } from '../native';
import { AdamW } from '../optim';
import { saveModel } from '../persist';
import { Random } from '../random';
import { cosineWithWarmup } from '../schedule';
import { argmaxRows, evaluate, onDevice } from './classify';
import { digitPng } from './images';
import { DIGIT_PIXELS, type Digits, imageBatch, labelBatch, loadMnist, permutation } from './mnist';
import { attentionGridSpec, type AttentionSample, type EpochRecord, heatmapSpec, trainingCurvesSpec, writeChart } from './plots';

/** The demo's model: 7×7 patches (16 tokens and CLS), width 64, 4 pre-LN blocks. */
export const DEMO_MODEL: ViTClassifierConfig = {
  imgSize: 28, patchSize: 7, inChannels: 1, numClasses: 10, dModel: 64, numHeads: 4, dFF: 128, depth: 4,
};

/** Options of the demo's training run (the command line's flags). */
export interface TrainOptions {
  epochs: number;
  batchSize: number;
  /** Peak learning rate of the cosine schedule. */
  lr: number;
  /** Seed of the initialisation, the batch order and the augmentation (the data split is fixed). */
  seed: number;
  trainSize: number;
  testSize: number;
  /** Output folder (created if missing). */
  out: string;
  /** Where the model trains (default 'cpu'); the checkpoint and pictures are made on the CPU. */
  device?: Device;
  /**
   * Data-parallel over the ranks of an MPI job (`mpirun -np N nodeformer train --distributed`): each
   * rank reads its DistributedSampler share with batches of batchSize (global batch batchSize × N),
   * gradients are averaged by DistributedDataParallel, rank 0 logs, evaluates and writes the outputs.
   */
  distributed?: boolean;
  /** Draw a progress bar (on a terminal). */
  progress: boolean;
  /** Where the epoch lines and the summary go. */
  log: (line: string) => void;
}

/** Training defaults: the numbers behind `npm run demo`. */
export const TRAIN_DEFAULTS = { epochs: 12, batchSize: 32, lr: 3e-3, seed: 0, trainSize: 8000, testSize: 2000, out: 'nodeformer-demo' };
const WARMUP_FRACTION = 0.05;
const WEIGHT_DECAY = 0.05;
const MAX_SHIFT = 1;

/** What a run measured and wrote. */
export interface TrainResult {
  history: EpochRecord[];
  testAccuracy: number;
  seconds: number;
  imagesPerSecond: number;
  files: string[];
}

function percent(x: number): string {
  return `${(100 * x).toFixed(2)}%`;
}

interface EpochContext {
  epoch: number; step: number; rng: Random; lr: (step: number) => number;
  /** The module forward/backward run through (the model, or its DistributedDataParallel wrapper: the same types). */
  net: ViTClassifier | DistributedDataParallel<ViTClassifier>;
  sampler: DistributedSampler | null;
}

async function trainEpoch(
  model: ViTClassifier, opt: AdamW, train: Digits, o: TrainOptions, ctx: EpochContext,
): Promise<{ loss: number; accuracy: number; seconds: number }> {
  const device = o.device ?? 'cpu';
  const world = ctx.sampler ? ctx.sampler.worldSize : 1;
  const bar = o.progress ? new SingleBar({
    format: `epoch {epoch}/${o.epochs} [{bar}] {percentage}% | loss {loss} | acc {acc} | ` +
      (world > 1 ? `world ${world} | {speed} img/s per rank` : '{speed} img/s') + ' | ETA {eta_formatted}',
    barsize: 24, hideCursor: true, etaBuffer: 40,
  }) : null;
  ctx.sampler?.setEpoch(ctx.epoch);
  const order = ctx.sampler ? ctx.sampler.indices() : permutation(train.count, ctx.rng);
  bar?.start(order.length, 0, { epoch: ctx.epoch, loss: '-', acc: '-', speed: '-' });
  const t0 = performance.now();
  let lossSum = 0, correct = 0, seen = 0;
  for (let start = 0; start < order.length; start += o.batchSize) {
    // Turning the event loop once per step lets the bar redraw and native buffers be recycled.
    await yieldToLoop();
    const idx = order.subarray(start, Math.min(start + o.batchSize, order.length));
    const x = onDevice(imageBatch(train, idx, { rng: ctx.rng, maxShift: MAX_SHIFT }), device);
    const labels = labelBatch(train, idx), y = labels.to(device);
    const logits = ctx.net.forward(x);
    const { loss, grad } = crossEntropy(logits, y);
    opt.zeroGrad();
    ctx.net.backward(grad).dispose();
    opt.options.lr = ctx.lr(++ctx.step);
    opt.step();
    argmaxRows(logits.toArray(), model.numClasses).forEach((p, i) => (correct += Number(p.label === labels.data[i])));
    lossSum += loss * idx.length;
    seen += idx.length;
    for (const t of [x, labels, y, logits, grad]) t.dispose();
    const speed = seen / ((performance.now() - t0) / 1000);
    bar?.update(seen, { loss: (lossSum / seen).toFixed(4), acc: percent(correct / seen), speed: speed.toFixed(0) });
  }
  bar?.stop();
  return { loss: lossSum / seen, accuracy: correct / seen, seconds: (performance.now() - t0) / 1000 };
}

/** Trains the demo model, saves it and draws its pictures into `o.out`. */
export async function trainDemo(o: TrainOptions): Promise<TrainResult> {
  positiveInt('epochs', o.epochs);
  if (o.distributed) await distributed.init();
  const rank = distributed.rank(), world = distributed.worldSize(), lead = rank === 0;
  const log = lead ? o.log : () => undefined;
  const { train, test } = loadMnist({ trainSize: o.trainSize, testSize: o.testSize });
  if (lead) fs.mkdirSync(o.out, { recursive: true });
  const model = new ViTClassifier({ ...DEMO_MODEL, seed: o.seed }).to(o.device ?? 'cpu');
  const net = o.distributed ? new DistributedDataParallel(model) : model;
  const sampler = o.distributed ? new DistributedSampler(train.count, { seed: o.seed }) : null;
  const opt = new AdamW(model.parameters(), { lr: o.lr, weightDecay: WEIGHT_DECAY });
  const totalSteps = o.epochs * Math.ceil((sampler ? sampler.numSamples : train.count) / o.batchSize);
  const lr = cosineWithWarmup({ lr: o.lr, warmupSteps: Math.round(WARMUP_FRACTION * totalSteps), totalSteps });
  const params = model.parameters().reduce((n, p) => n + p.size, 0);
  if (world > 1) log(`Distributed: ${world} ranks (MPI), ${o.batchSize} images per rank and step (global batch ${o.batchSize * world}), ` +
    `${sampler!.numSamples} training digits per rank and epoch`);
  log(`Training a ViT (${params.toLocaleString('en-US')} parameters, ${DEMO_MODEL.patchSize}×${DEMO_MODEL.patchSize} patches, ` +
    `${DEMO_MODEL.depth} blocks of width ${DEMO_MODEL.dModel}) on ${train.count} MNIST digits, testing on ${test.count}; ` +
    `${o.device === 'cuda' ? 'CUDA' : `${native.numThreads()} threads, ${native.isaInfo().active} kernels`}`);

  const ctx: EpochContext = { epoch: 0, step: 0, rng: new Random(o.seed + 1 + rank), lr, net, sampler };
  const history: EpochRecord[] = [];
  let trainSeconds = 0;
  let final!: ReturnType<typeof evaluate>; // the last epoch's test evaluation (epochs >= 1)
  const t0 = performance.now();
  for (let epoch = 1; epoch <= o.epochs; epoch++) {
    ctx.epoch = epoch;
    const r = await trainEpoch(model, opt, train, { ...o, progress: o.progress && lead }, ctx);
    trainSeconds += r.seconds;
    const t = (final = evaluate(model, test, 250));
    history.push({ epoch, trainLoss: r.loss, trainAccuracy: r.accuracy, testLoss: t.loss, testAccuracy: t.accuracy });
    const seen = sampler ? sampler.numSamples : train.count;
    log(`epoch ${epoch}/${o.epochs}  train loss ${r.loss.toFixed(4)} acc ${percent(r.accuracy)}  |  ` +
      `test loss ${t.loss.toFixed(4)} acc ${percent(t.accuracy)}  |  ` +
      (world > 1 ? `world ${world}, ${(seen / r.seconds).toFixed(0)} img/s per rank (${((seen * world) / r.seconds).toFixed(0)} in all)` : `${(seen / r.seconds).toFixed(0)} img/s`));
  }
  const seconds = (performance.now() - t0) / 1000;
  model.to('cpu');
  // Rank 0 writes the checkpoint and pictures; the others wait for it (onRank0), then all leave together.
  const written = await distributed.onRank0(async () => ({
    files: await writeOutputs(model, test, final.predicted, history, o.out), samples: writeSamples(test, path.join(o.out, 'samples')),
  }), 'writing the outputs');
  if (o.distributed) await distributed.finalize();
  model.dispose();
  if (!written) // ranks other than 0: their own share's throughput
    return { history, testAccuracy: final.accuracy, seconds, imagesPerSecond: (o.epochs * sampler!.numSamples) / trainSeconds, files: [] };
  const { files, samples } = written;
  const imagesPerSecond = (o.epochs * (sampler ? sampler.totalSize : train.count)) / trainSeconds;
  o.log(`Test accuracy ${percent(final.accuracy)} (${Math.round(final.accuracy * test.count)}/${test.count}) after ${o.epochs} epoch${o.epochs === 1 ? '' : 's'} ` +
    `in ${seconds.toFixed(1)} s (${imagesPerSecond.toFixed(0)} training images/s); wrote ${files.map((f) => path.basename(f)).join(', ')} ` +
    `and ${samples.length} sample digits (samples/digit-<label>.png) to ${o.out}`);
  return { history, testAccuracy: final.accuracy, seconds, imagesPerSecond, files: [...files, ...samples] };
}

/** Test digits for the attention picture: the first ones, with up to a quarter of the grid kept for mistakes. */
function pickSamples(test: Digits, predicted: Int32Array, count: number): number[] {
  const wrong = [...predicted.keys()].filter((i) => predicted[i] !== test.labels[i]).slice(0, Math.floor(count / 4));
  const right = [...predicted.keys()].filter((i) => predicted[i] === test.labels[i]).slice(0, count - wrong.length);
  return [...right, ...wrong].sort((a, b) => a - b);
}

/** Saves the model and draws the pictures; returns the paths written. */
export async function writeOutputs(model: ViTClassifier, test: Digits, predicted: Int32Array, history: EpochRecord[], out: string): Promise<string[]> {
  const files = { model: path.join(out, 'model.safetensors'), curves: path.join(out, 'training-curves.png'),
    attention: path.join(out, 'attention.png'), positions: path.join(out, 'positional-encoding.png') };
  saveModel(files.model, model);
  await writeChart(files.curves, trainingCurvesSpec(history));

  const chosen = pickSamples(test, predicted, 24);
  const batch = imageBatch(test, chosen);
  const maps = model.attentionMaps(batch);
  batch.dispose();
  const last = maps[maps.length - 1];
  const [, H, T] = last.shape;
  const samples: AttentionSample[] = chosen.map((i, b) => {
    const attention = new Float32Array(T - 1);
    for (let h = 0; h < H; h++)
      for (let k = 1; k < T; k++) attention[k - 1] += last.data[((b * H + h) * T) * T + k] / H;
    return { pixels: test.pixels.slice(i * DIGIT_PIXELS, (i + 1) * DIGIT_PIXELS), label: test.labels[i], predicted: predicted[i], attention };
  });
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
