/** The watched number of modelCheckpoint and earlyStopping: which one, which way is better, by how much. */
import { invalidArg } from '../../validation/errors';
import type { EpochLogs, FitContext, MonitorKey } from './types';

/** Whether smaller ('min') or larger ('max') is better; 'auto': larger for accuracies, smaller otherwise. */
export type MonitorMode = 'min' | 'max' | 'auto';

const KEYS: readonly MonitorKey[] = ['loss', 'accuracy', 'valLoss', 'valAccuracy'];

/** Tracks the best value of one key of the epoch logs. */
export class Monitor {
  private readonly sign: 1 | -1;
  /** The best value so far (null before the first epoch). */
  best: number | null = null;

  /** `owner` names the callback in messages ("modelCheckpoint"). */
  constructor(private readonly owner: string, readonly key: MonitorKey, mode: MonitorMode, private readonly minDelta: number) {
    if (!KEYS.includes(key)) invalidArg(`${owner} options.monitor`, `one of ${KEYS.map((k) => `'${k}'`).join(', ')}`, key);
    if (mode !== 'min' && mode !== 'max' && mode !== 'auto') invalidArg(`${owner} options.mode`, "'min', 'max' or 'auto'", mode);
    if (typeof minDelta !== 'number' || !(minDelta >= 0) || minDelta === Infinity) invalidArg(`${owner} options.minDelta`, 'a finite number >= 0', minDelta);
    this.sign = mode === 'max' || (mode === 'auto' && key.endsWith('ccuracy')) ? 1 : -1;
  }

  /** Checks the run can produce the key (validation keys need a validation loader). */
  checkRun(ctx: FitContext): void {
    if (this.key.startsWith('val') && !ctx.hasValidation)
      invalidArg(`${this.owner} options.monitor`, "'loss' or 'accuracy' (fit has no validation loader)", this.key);
  }

  /** The watched value of an epoch. */
  value(logs: EpochLogs): number {
    const v = logs[this.key];
    if (v === undefined)
      invalidArg(`${this.owner} options.monitor`,
        `a number this run's epoch logs hold (${KEYS.filter((k) => logs[k] !== undefined).join(', ')}; accuracies need classification outputs)`, this.key);
    return v;
  }

  /** Whether `v` beats the best by more than minDelta (a NaN never does); if so it becomes the best. */
  update(v: number): boolean {
    const better = this.best === null ? !Number.isNaN(v) : this.sign * (v - this.best) > this.minDelta;
    if (better) this.best = v;
    return better;
  }
}
