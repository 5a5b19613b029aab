/**
 * progressBar: one cli-progress bar per epoch (loss, accuracy, samples/s, ETA) on a terminal.
 * cli-progress, an optional peer dependency (lib/optional), is loaded only when a bar is drawn, so
 * the library runs without it.
 */
import type { SingleBar } from 'cli-progress';

import { OptionKeys } from '../options';
import { requireOptional } from '../optional';
import type { Callback } from './types';

/** Options of progressBar. */
export interface ProgressBarOptions {
  /** Where the bar is drawn (default process.stderr); nothing is drawn unless it is a TTY. */
  stream?: NodeJS.WriteStream;
}
const OPTIONS = new OptionKeys<ProgressBarOptions>('progressBar options', { stream: true });

/**
 * A callback drawing a progress bar for each epoch on `stream` when it is a terminal (a TTY):
 * batches done of the loader's length (a count when it has none), the epoch's mean loss and
 * accuracy so far, samples per second and the time left. Does nothing when the stream is not a TTY;
 * on a TTY without cli-progress installed, ERR_NF_MISSING_PACKAGE with the npm install that adds it.
 */
export function progressBar(options: ProgressBarOptions = {}): Callback {
  const { stream = process.stderr } = OPTIONS.check('options', options);
  if (!stream?.isTTY) return {};
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
