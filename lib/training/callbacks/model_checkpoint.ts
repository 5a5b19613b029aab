/** modelCheckpoint: saves a resumable checkpoint when the watched number improves (or every epoch). */
import { saveCheckpointAsync } from '../checkpoint';
import { invalidArg } from '../../validation/errors';
import { OptionKeys } from '../../validation/options';
import { Monitor, type MonitorMode } from './monitor';
import type { Callback, MonitorKey } from './types';

/** Options of modelCheckpoint. */
export interface ModelCheckpointOptions {
  /** The number to watch (default 'valLoss'). */
  monitor?: MonitorKey;
  /** Which way is better (default 'auto': larger for accuracies). */
  mode?: MonitorMode;
  /** Save only when the watched number improves (default true); false saves after every epoch. */
  saveBestOnly?: boolean;
  /** The smallest change that counts as an improvement (default 0). */
  minDelta?: number;
}
const OPTIONS = new OptionKeys<ModelCheckpointOptions>('modelCheckpoint options', { monitor: true, mode: true, saveBestOnly: true, minDelta: true });

/**
 * A callback writing a checkpoint (lib/training/checkpoint.ts: model, optimizer state, schedule, step,
 * random streams, plus fit's epoch and history) to `path`, atomically, after each epoch whose
 * monitored number is the best so far. fit({ resumeFrom: path }) continues from it.
 */
export function modelCheckpoint(path: string, options: ModelCheckpointOptions = {}): Callback {
  if (typeof path !== 'string' || path.length === 0) invalidArg('path', 'a file path', path);
  const { monitor = 'valLoss', mode = 'auto', saveBestOnly = true, minDelta = 0 } = OPTIONS.check('options', options);
  if (typeof saveBestOnly !== 'boolean') invalidArg('modelCheckpoint options.saveBestOnly', 'a boolean', saveBestOnly);
  const m = new Monitor('modelCheckpoint', monitor, mode, minDelta);
  return {
    onTrainBegin(ctx) {
      if (saveBestOnly) m.checkRun(ctx);
      for (const logs of ctx.history) m.update(m.value(logs)); // a resumed run's best so far
    },
    async onEpochEnd(logs, ctx) {
      const improved = saveBestOnly ? m.update(m.value(logs)) : true;
      if (improved) await saveCheckpointAsync(path, ctx.checkpointState());
    },
  };
}
