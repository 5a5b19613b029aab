/** fit()'s built-in callbacks and the callback interface. */
export { earlyStopping } from './early_stopping';
export type { EarlyStoppingOptions } from './early_stopping';
export { modelCheckpoint } from './model_checkpoint';
export type { ModelCheckpointOptions } from './model_checkpoint';
export type { MonitorMode } from './monitor';
export { progressBar } from './progress_bar';
export type { ProgressBarOptions } from './progress_bar';
export { tensorBoard } from './tensorboard';
export type { TensorBoardOptions } from './tensorboard';
export type { BatchLogs, Callback, EpochLogs, FitContext, MonitorKey } from './types';
