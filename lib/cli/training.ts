/**
 * The one training path of `nodeformer train`, for the MNIST digits and for an image folder alike:
 * fit() with AdamW and a cosine schedule with warmup, a progress bar on a terminal, an epoch line
 * of training and validation loss and accuracy, model.safetensors at the best validation loss
 * (lib/cli/best_model), and with a log folder TensorBoard's loss, accuracy, learning rate and
 * throughput per epoch (plus the caller's images) and the run's hyperparameters.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

import { progressBar, tensorBoard, type Callback, type EpochLogs } from '../training/callbacks';
import type { Device } from '../core/device';
import { fit, type Batch, type BatchSource } from '../training/fit';
import type { Module } from '../core/module';
import type { ViTClassifier } from '../models/vit';
import { native } from '../native/addon';
import { AdamW } from '../training/optim';
import { cosineWithWarmup } from '../training/schedule';
import { SummaryWriter } from '../io/tensorboard';
import { bestModel } from './best_model';

/** The flags both kinds of run take. */
export interface RunOptions {
  epochs: number;
  batchSize: number;
  /** Peak learning rate of the cosine schedule. */
  lr: number;
  /** Seed of the initialisation, the batch order and the augmentation. */
  seed: number;
  /** Output folder (created if missing): model.safetensors and whatever the caller adds. */
  out: string;
  /** TensorBoard log folder (default: none). */
  logdir?: string;
  /** Where the model trains (default 'cpu'). */
  device?: Device;
  /** Draw a progress bar (on a terminal). */
  progress: boolean;
  /** Where the log lines go. */
  log: (line: string) => void;
}

/** What a run trains on. */
export interface RunData {
  /** Training batches on the model's device (reshuffled and augmented per epoch: fit calls setEpoch). */
  train: BatchSource<Batch<ViTClassifier>> & { readonly length: number };
  /** Validation batches, in order, without augmentation (none: the checkpoint follows the training loss). */
  validation?: BatchSource<Batch<ViTClassifier>>;
  /** The training set in words, for the first log line. */
  description: string;
  /** The validation set's name in the epoch lines and the hparams metrics ('validation'; the demo's 'test'). */
  validationName: string;
}

/** How the caller's run differs: a data-parallel wrapper, the rank, the checkpoint's metadata, extra TensorBoard records. */
export interface RunSetup {
  /** What fit() trains: the model, or its DistributedDataParallel wrapper (default: the model). */
  net?: Module;
  /** Ranks of the job, for the epoch line's throughput (default 1). */
  world?: number;
  /** Whether this rank logs and writes the checkpoint and TensorBoard files (default true; rank 0 of a job). */
  lead?: boolean;
  /** Metadata saved with model.safetensors (a folder model's class names and transform). */
  metadata?: Record<string, string>;
  /** Hyperparameters for TensorBoard's hparams view. */
  hparams: Record<string, number | string | boolean>;
  /** A callback logging more records (the demo's attention grid) with the run's writer. */
  images?: (writer: SummaryWriter) => Callback;
}

/** What a run did. */
export interface RunResult {
  /** fit()'s history. */
  history: EpochLogs[];
  /** The epoch whose weights model.safetensors holds and the model has now (0 on ranks other than 0). */
  bestEpoch: number;
  /** model.safetensors in the output folder. */
  file: string;
  /** Seconds of fit() (training, validation and callbacks). */
  seconds: number;
}

const WARMUP_FRACTION = 0.05;
const WEIGHT_DECAY = 0.05;

/** A fraction as a percentage with two decimals ("97.55%"). */
export function percent(x: number | undefined): string {
  return `${(100 * (x ?? NaN)).toFixed(2)}%`;
}

/** An epoch's line: "epoch 3/12  train loss … acc …%  |  validation loss … acc …%  |  2100 img/s". */
function epochLine(h: EpochLogs, epochs: number, world: number, validationName: string): string {
  const speed = world > 1
    ? `world ${world}, ${h.samplesPerSecond.toFixed(0)} img/s per rank (${(h.samplesPerSecond * world).toFixed(0)} in all)`
    : `${h.samplesPerSecond.toFixed(0)} img/s`;
  const validation = h.valLoss === undefined ? '' : `${validationName} loss ${h.valLoss.toFixed(4)} acc ${percent(h.valAccuracy)}  |  `;
  return `epoch ${h.epoch}/${epochs}  train loss ${h.loss.toFixed(4)} acc ${percent(h.accuracy)}  |  ${validation}${speed}`;
}

/** The first log line: "Training a ViT (<size and shape>) on <data>; <threads and kernels, or CUDA>". */
function firstLine(model: ViTClassifier, description: string, device: Device): string {
  const c = model.config, params = model.parameters().reduce((n, p) => n + p.size, 0);
  const kernels = device === 'cuda' ? 'CUDA' : `${native.numThreads()} threads, ${native.isaInfo().active} kernels`;
  return `Training a ViT (${params.toLocaleString('en-US')} parameters, ${c.imgSize}×${c.imgSize} images in ` +
    `${c.patchSize}×${c.patchSize} patches, ${c.depth} blocks of width ${c.dModel}) on ${description}; ${kernels}`;
}

/** TensorBoard's hparams metrics: the validation (else training) loss and accuracy of the epoch kept. */
function hparamMetrics(h: EpochLogs, validationName: string): Record<string, number> {
  const [name, loss, accuracy] = h.valLoss === undefined ? ['train', h.loss, h.accuracy] : [validationName, h.valLoss, h.valAccuracy];
  return { ...(accuracy === undefined ? {} : { [`hparam/${name}_accuracy`]: accuracy }), [`hparam/${name}_loss`]: loss };
}

/**
 * Trains `model` (on its device) on `data` for o.epochs epochs (see the file comment), keeps the
 * best epoch in <out>/model.safetensors, and leaves the model on the CPU with that epoch's weights.
 */
export async function runTraining(model: ViTClassifier, data: RunData, o: RunOptions, s: RunSetup): Promise<RunResult> {
  const lead = s.lead ?? true, world = s.world ?? 1, log = lead ? o.log : () => undefined;
  const device = o.device ?? 'cpu';
  const opt = new AdamW(model.parameters(), { lr: o.lr, weightDecay: WEIGHT_DECAY });
  const totalSteps = o.epochs * data.train.length;
  const schedule = cosineWithWarmup({ lr: o.lr, warmupSteps: Math.round(WARMUP_FRACTION * totalSteps), totalSteps });
  log(firstLine(model, data.description, device));

  const file = path.join(o.out, 'model.safetensors');
  if (lead) fs.mkdirSync(o.out, { recursive: true });
  const best = lead ? bestModel(file, model, s.metadata) : null;
  const writer = lead && o.logdir ? new SummaryWriter(o.logdir) : null;
  const callbacks: Callback[] = [{ onEpochEnd: (h) => log(epochLine(h, o.epochs, world, data.validationName)) }];
  if (lead && o.progress) callbacks.unshift(progressBar());
  if (best) callbacks.push(best);
  if (writer) {
    callbacks.push(tensorBoard(writer));
    if (s.images) callbacks.push(s.images(writer));
    writer.addText('run', `ViT ${JSON.stringify(model.config)}; ${JSON.stringify({ ...o, log: undefined })}`, 0);
  }
  const t0 = performance.now();
  let history: EpochLogs[];
  try {
    history = await fit(s.net ?? model, opt, data.train, { epochs: o.epochs, validation: data.validation, schedule, callbacks });
  } catch (e) {
    await writer?.close().catch(() => undefined); // keep what was logged; the training error is the one to report
    throw e;
  } finally {
    opt.dispose();
  }
  const seconds = (performance.now() - t0) / 1000;
  model.to('cpu');
  best?.finish();
  const bestEpoch = best?.epoch ?? 0;
  if (writer) {
    writer.addHparams(s.hparams, hparamMetrics(history[bestEpoch - 1], data.validationName), { runName: 'hparams' });
    await writer.close();
  }
  return { history, bestEpoch, file, seconds };
}
