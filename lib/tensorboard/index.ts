/** TensorBoard logging: SummaryWriter and the pieces of its file format. */
export { SummaryWriter } from './writer';
export type { AddHparamsOptions, HistogramValues, SummaryWriterOptions } from './writer';
export type { HparamValue } from './hparams';
