/** earlyStopping: ends training when the watched number stops improving. */
import { invalidArg } from '../../validation/errors';
import { OptionKeys } from '../../validation/options';
import { Monitor, type MonitorMode } from './monitor';
import type { Callback, MonitorKey } from './types';

/** Options of earlyStopping. */
export interface EarlyStoppingOptions {
  /** The number to watch (default 'valLoss'). */
  monitor?: MonitorKey;
  /** Epochs without improvement to wait before stopping (default 3). */
  patience?: number;
  /** The smallest change that counts as an improvement (default 0). */
  minDelta?: number;
  /** Which way is better (default 'auto': larger for accuracies). */
  mode?: MonitorMode;
}
const OPTIONS = new OptionKeys<EarlyStoppingOptions>('earlyStopping options', { monitor: true, patience: true, minDelta: true, mode: true });

/**
 * A callback that stops fit() (after the current epoch) once `patience` epochs in a row have not
 * improved the watched number by more than `minDelta` over the best so far (Keras's rule: with
 * patience 0, the first epoch without improvement).
 */
export function earlyStopping(options: EarlyStoppingOptions = {}): Callback {
  const { monitor = 'valLoss', patience = 3, minDelta = 0, mode = 'auto' } = OPTIONS.check('options', options);
  if (!Number.isSafeInteger(patience) || patience < 0) invalidArg('earlyStopping options.patience', 'a non-negative integer', patience);
  const m = new Monitor('earlyStopping', monitor, mode, minDelta);
  let waited = 0; // epochs since the best
  /** Counts an epoch's value; true when it makes `patience` epochs without improvement. */
  const see = (v: number) => (waited = m.update(v) ? 0 : waited + 1) > 0 && waited >= patience;
  return {
    onTrainBegin(ctx) {
      m.checkRun(ctx);
      for (const logs of ctx.history) see(m.value(logs)); // a resumed run's best and count so far
    },
    onEpochEnd(logs, ctx) {
      if (see(m.value(logs))) ctx.stopTraining = true;
    },
  };
}
