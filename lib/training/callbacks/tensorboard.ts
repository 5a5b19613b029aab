/** tensorBoard: logs each epoch's numbers (and optionally weight and gradient histograms) with a SummaryWriter. */
import { invalidArg } from '../../validation/errors';
import { OptionKeys } from '../../validation/options';
import { SummaryWriter } from '../../io/tensorboard';
import type { Callback, EpochLogs } from './types';

/** Options of the tensorBoard callback. */
export interface TensorBoardOptions {
  /** Histograms of every parameter and its gradient after each epoch (default false). */
  histograms?: boolean;
}
const OPTIONS = new OptionKeys<TensorBoardOptions>('tensorBoard options', { histograms: true });

/** The scalar tags and the epoch log each comes from. */
const SCALARS: [string, keyof EpochLogs][] = [
  ['loss/train', 'loss'], ['loss/validation', 'valLoss'], ['accuracy/train', 'accuracy'], ['accuracy/validation', 'valAccuracy'],
  ['learning_rate', 'lr'], ['throughput/samples_per_second', 'samplesPerSecond'],
];

/**
 * A callback logging, at each epoch's end with the epoch as the step: loss/train,
 * loss/validation, accuracy/train, accuracy/validation (those the logs hold), learning_rate and
 * throughput/samples_per_second; with `histograms`, weights/<name> and gradients/<name>. Given a
 * folder it opens a SummaryWriter there and closes it when training ends; given a writer it
 * flushes it each epoch and leaves it open (to log more, e.g. images, from your own callback).
 */
export function tensorBoard(writerOrLogdir: SummaryWriter | string, options: TensorBoardOptions = {}): Callback {
  if (!(writerOrLogdir instanceof SummaryWriter) && (typeof writerOrLogdir !== 'string' || writerOrLogdir.length === 0))
    invalidArg('writerOrLogdir', 'a SummaryWriter or a folder path', writerOrLogdir);
  const { histograms = false } = OPTIONS.check('options', options);
  if (typeof histograms !== 'boolean') invalidArg('tensorBoard options.histograms', 'a boolean', histograms);
  const owned = typeof writerOrLogdir === 'string';
  let writer: SummaryWriter | null = owned ? null : writerOrLogdir;
  return {
    onTrainBegin() {
      writer ??= new SummaryWriter(writerOrLogdir as string);
    },
    async onEpochEnd(logs, ctx) {
      const w = writer!;
      for (const [tag, key] of SCALARS) if (logs[key] !== undefined) w.addScalar(tag, logs[key], logs.epoch);
      if (histograms)
        for (const [name, p] of ctx.model.namedParameters()) {
          w.addHistogram(`weights/${name}`, p, logs.epoch);
          if (p.grad) w.addHistogram(`gradients/${name}`, p.grad, logs.epoch);
        }
      await w.flush();
    },
    async onTrainEnd() {
      if (owned) await writer?.close();
      else await writer?.flush();
    },
  };
}
