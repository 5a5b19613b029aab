/** TensorBoard logging: SummaryWriter writes event files (TFRecord framing, Event/Summary protobufs) for TensorBoard. */
export { SummaryWriter } from './writer';
export type { AddHparamsOptions, HistogramValues, SummaryWriterOptions } from './writer';
export type { HparamValue } from './hparams';
