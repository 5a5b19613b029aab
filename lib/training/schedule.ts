/**
 * Learning-rate schedules: functions of the 1-based step number, applied by setting
 * `optimizer.lr = schedule(step)` before `optimizer.step()` (or with `optimizer.setSchedule`).
 */
import { invalidArg } from '../validation/errors';
import { OptionKeys } from '../validation/options';

/** Options of cosineWithWarmup. */
export interface CosineWithWarmupOptions {
  /** Peak learning rate, reached at warmupSteps. */
  lr: number;
  warmupSteps: number;
  totalSteps: number;
  /** Learning rate at and after totalSteps (default 0). */
  minLr?: number;
}
const COSINE_OPTIONS = new OptionKeys<CosineWithWarmupOptions>('cosineWithWarmup options',
  { lr: true, warmupSteps: true, totalSteps: true, minLr: true });

/** Options of inverseSqrtWarmup. */
export interface InverseSqrtWarmupOptions {
  dModel: number;
  warmupSteps: number;
  /** Scale of the whole schedule (default 1). */
  factor?: number;
}
const INVERSE_SQRT_OPTIONS = new OptionKeys<InverseSqrtWarmupOptions>('inverseSqrtWarmup options',
  { dModel: true, warmupSteps: true, factor: true });

/** What a schedule was made from: its kind and options (checkpoints store it; scheduleFromConfig rebuilds it). */
export type ScheduleConfig =
  | { kind: 'cosineWithWarmup'; options: CosineWithWarmupOptions }
  | { kind: 'inverseSqrtWarmup'; options: InverseSqrtWarmupOptions };
const SCHEDULE_CONFIG = new OptionKeys<ScheduleConfig>('schedule config', { kind: true, options: true });

/** A learning rate as a function of the 1-based step; the library's schedules also carry their config. */
export type Schedule = ((step: number) => number) & { readonly config?: ScheduleConfig };

function check(name: string, v: number, min: number) {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min) invalidArg(name, `a finite number >= ${min}`, v);
}

/**
 * Linear warmup from 0 to `lr` over `warmupSteps`, then cosine decay to `minLr` at `totalSteps`
 * (held at `minLr` afterwards).
 */
export function cosineWithWarmup(options: CosineWithWarmupOptions): Schedule {
  const { lr, warmupSteps, totalSteps, minLr = 0 } = COSINE_OPTIONS.check('options', options);
  check('lr', lr, 0);
  check('warmupSteps', warmupSteps, 0);
  check('totalSteps', totalSteps, 1);
  check('minLr', minLr, 0);
  if (warmupSteps > totalSteps) invalidArg('warmupSteps', `at most totalSteps (${totalSteps})`, warmupSteps);
  const config: ScheduleConfig = { kind: 'cosineWithWarmup', options: { lr, warmupSteps, totalSteps, minLr } };
  return Object.assign((step: number) => {
    check('step', step, 0);
    if (step <= warmupSteps) return (lr * step) / Math.max(1, warmupSteps);
    const progress = Math.min(1, (step - warmupSteps) / Math.max(1, totalSteps - warmupSteps));
    return minLr + 0.5 * (lr - minLr) * (1 + Math.cos(Math.PI * progress));
  }, { config });
}

/**
 * Vaswani et al.'s schedule: lr = factor · dModel^−½ · min(step^−½, step · warmupSteps^−1.5):
 * linear warmup, then decay with the inverse square root of the step.
 */
export function inverseSqrtWarmup(options: InverseSqrtWarmupOptions): Schedule {
  const { dModel, warmupSteps, factor = 1 } = INVERSE_SQRT_OPTIONS.check('options', options);
  check('dModel', dModel, 1);
  check('warmupSteps', warmupSteps, 1);
  check('factor', factor, 0);
  const config: ScheduleConfig = { kind: 'inverseSqrtWarmup', options: { dModel, warmupSteps, factor } };
  return Object.assign((step: number) => {
    check('step', step, 0);
    const s = Math.max(1, step);
    return factor * dModel ** -0.5 * Math.min(s ** -0.5, s * warmupSteps ** -1.5);
  }, { config });
}

/** Rebuilds a schedule from its config (e.g. the one a checkpoint stored). */
export function scheduleFromConfig(config: ScheduleConfig): Schedule {
  if (config !== null && typeof config === 'object') SCHEDULE_CONFIG.check('config', config);
  if (config?.kind === 'cosineWithWarmup') return cosineWithWarmup(config.options);
  if (config?.kind === 'inverseSqrtWarmup') return inverseSqrtWarmup(config.options);
  return invalidArg('config', "a schedule config of kind 'cosineWithWarmup' or 'inverseSqrtWarmup'", config);
}
