/**
 * progressBar: one cli-progress bar per epoch (loss, accuracy, samples/s, ETA) on a terminal.
 * cli-progress, an optional peer dependency (lib/optional), is loaded only when a bar is drawn;
 * without it the terminal gets one plain line per epoch and one note saying what to install, so a
 * missing optional package never stops training.
 */
import type { SingleBar } from 'cli-progress';

import { OptionKeys } from '../../validation/options';
import { installCommand, requireOptional, resolveOptional } from '../../core/optional';
import type { Callback, EpochLogs } from './types';

/** Options of progressBar. */
export interface ProgressBarOptions {
  /** Where the bar is drawn (default process.stderr); nothing is drawn unless it is a TTY. */
  stream?: NodeJS.WriteStream;
}
const OPTIONS = new OptionKeys<ProgressBarOptions>('progressBar options', { stream: true });

/**
 * A callback drawing a progress bar for each epoch on `stream` when it is a terminal (a TTY):
 * batches done of the loader's length (a count when it has none), the epoch's mean loss and
 * accuracy so far, samples per second and the time left. Does nothing when the stream is not a TTY.
 * On a TTY without cli-progress installed it writes one line per epoch instead (epochLine), after a
 * note with the npm install that adds the bars.
 */
export function progressBar(options: ProgressBarOptions = {}): Callback {
  const { stream = process.stderr } = OPTIONS.check('options', options);
  if (!stream?.isTTY) return {};
  if (resolveOptional('cli-progress') === null) return plainLines(stream);
  const { SingleBar } = requireOptional<typeof import('cli-progress')>('cli-progress', 'progressBar() draws with cli-progress');
  let bar: SingleBar | null = null;
  let lossSum = 0, samples = 0, correct = 0, counted = 0, t0 = 0;
  return {
    onEpochBegin(epoch, ctx) {
      const total = ctx.batchesPerEpoch;
      bar = new SingleBar({
        format: `epoch {epoch}/${ctx.epochs} ${total === undefined ? 'batch {value}' : '[{bar}] {percentage}%'} | loss {loss} | acc {acc} | ` +
          '{speed} samples/s' + (total === undefined ? '' : ' | ETA {eta_formatted}'),
        barsize: 24, hideCursor: true, etaBuffer: 40, stream,
      });
      bar.start(total ?? 0, 0, { epoch, loss: '-', acc: '-', speed: '-' });
      lossSum = samples = correct = counted = 0;
      t0 = performance.now();
    },
    onBatchEnd(logs) {
      lossSum += logs.loss * logs.samples;
      samples += logs.samples;
      if (logs.accuracy !== undefined) (correct += logs.accuracy * logs.samples), (counted += logs.samples);
      bar?.update(logs.batch + 1, {
        loss: (lossSum / samples).toFixed(4), acc: counted ? `${((100 * correct) / counted).toFixed(2)}%` : '-',
        speed: (samples / ((performance.now() - t0) / 1000)).toFixed(0),
      });
    },
    onEpochEnd() {
      bar?.stop();
      bar = null;
    },
  };
}

/** One epoch as a line: "epoch 3/20 | loss 0.2140 | acc 93.75% | val loss 0.1983 | val acc 94.10% | 1,804 samples/s | 4.4 s". */
export function epochLine(logs: EpochLogs, epochs: number): string {
  const pct = (v: number) => `${(100 * v).toFixed(2)}%`;
  return [`epoch ${logs.epoch}/${epochs}`, `loss ${logs.loss.toFixed(4)}`,
    ...(logs.accuracy === undefined ? [] : [`acc ${pct(logs.accuracy)}`]),
    ...(logs.valLoss === undefined ? [] : [`val loss ${logs.valLoss.toFixed(4)}`]),
    ...(logs.valAccuracy === undefined ? [] : [`val acc ${pct(logs.valAccuracy)}`]),
    `${Math.round(logs.samplesPerSecond).toLocaleString('en')} samples/s`, `${logs.seconds.toFixed(1)} s`].join(' | ');
}

/** progressBar without cli-progress: a note once, then one line per epoch. */
function plainLines(stream: NodeJS.WriteStream): Callback {
  return {
    onTrainBegin() {
      stream.write(`progressBar(): cli-progress is not installed, so progress is one line per epoch; for a bar per epoch: ${installCommand(['cli-progress'])}\n`);
    },
    onEpochEnd(logs, ctx) {
      stream.write(`${epochLine(logs, ctx.epochs)}\n`);
    },
  };
}
