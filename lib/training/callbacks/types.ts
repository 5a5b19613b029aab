/** What fit() tells its callbacks, and the hooks a callback may implement. */
import type { CheckpointState } from '../checkpoint';
import type { Module } from '../../core/module';
import type { Optimizer } from '../optim';

/** One training step's numbers, given to onBatchEnd. */
export interface BatchLogs {
  /** The batch's index in its epoch (from 0). */
  batch: number;
  /** Optimizer steps done in all (this one included). */
  step: number;
  /** The batch's mean loss. */
  loss: number;
  /** Samples in the batch (the target's first dimension). */
  samples: number;
  /** Fraction of correct argmax predictions (classification outputs only). */
  accuracy?: number;
  /** The learning rate of this step. */
  lr: number;
}

/** One epoch's numbers: an entry of fit()'s history, given to onEpochEnd. */
export interface EpochLogs {
  /** The epoch's number, from 1. */
  epoch: number;
  /** Optimizer steps done in all at its end. */
  step: number;
  /** Mean training loss over its samples. */
  loss: number;
  /** Training accuracy (classification outputs only: argmax of the logits' last axis against int32 targets). */
  accuracy?: number;
  /** Validation loss (with a validation loader). */
  valLoss?: number;
  /** Validation accuracy (with a validation loader, classification outputs only). */
  valAccuracy?: number;
  /** The learning rate of its last step. */
  lr: number;
  /** Training samples seen. */
  samples: number;
  /** Seconds of training (validation excluded). */
  seconds: number;
  /** Training throughput: samples / seconds. */
  samplesPerSecond: number;
}

/** The numbers of EpochLogs a monitor can watch. */
export type MonitorKey = 'loss' | 'accuracy' | 'valLoss' | 'valAccuracy';

/** The run a callback sees. */
export interface FitContext {
  readonly model: Module;
  readonly optimizer: Optimizer;
  /** The last epoch's number (fit's `epochs`). */
  readonly epochs: number;
  /** Batches per epoch, when the training loader has a `length`. */
  readonly batchesPerEpoch: number | undefined;
  /** Whether fit() validates after each epoch. */
  readonly hasValidation: boolean;
  /** Optimizer steps done in all. */
  readonly step: number;
  /** Epochs done, those of a resumed run included, as EpochLogs (fit's return value). */
  readonly history: readonly EpochLogs[];
  /** Set it to end training after the current epoch (earlyStopping does). */
  stopTraining: boolean;
  /** What a checkpoint of the run holds now: model, optimizer, schedule, step, and fit's epoch and history (to resume from). */
  checkpointState(): CheckpointState;
}

/**
 * Hooks called by fit(), each awaited before training goes on. onTrainEnd runs when training
 * ends normally (all epochs, or stopTraining), not when it throws.
 */
export interface Callback {
  onTrainBegin?(ctx: FitContext): void | Promise<void>;
  onEpochBegin?(epoch: number, ctx: FitContext): void | Promise<void>;
  onBatchEnd?(logs: BatchLogs, ctx: FitContext): void | Promise<void>;
  onEpochEnd?(logs: EpochLogs, ctx: FitContext): void | Promise<void>;
  onTrainEnd?(history: readonly EpochLogs[], ctx: FitContext): void | Promise<void>;
}

/** The hooks, in the order fit() calls them. */
export const HOOKS = ['onTrainBegin', 'onEpochBegin', 'onBatchEnd', 'onEpochEnd', 'onTrainEnd'] as const;
