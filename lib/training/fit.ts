/**
 * fit(): the training loop of Keras and PyTorch Lightning over nodeformer's own pieces. Each epoch
 * runs trainStepAsync over the training batches (every op on worker threads, so the event loop
 * stays free), then, with a validation loader, the loss and accuracy in eval mode; callbacks
 * (progress bar, TensorBoard, checkpoints, early stopping, or your own) hook in between. With
 * `resumeFrom` it restores a checkpoint written by modelCheckpoint (model, optimizer state,
 * schedule, step, random streams, epoch and history) and continues at the next epoch.
 */
import { resumeAsync, type CheckpointState } from './checkpoint';
import { invalidArg, NodeformerError } from '../validation/errors';
import { countHits, HitTally, type Hits } from './fit_accuracy';
import { crossEntropyOps } from './losses';
import { Module } from '../core/module';
import type { Optimizer } from './optim';
import { OptionKeys } from '../validation/options';
import type { Program } from '../core/program';
import type { Schedule } from './schedule';
import { Tensor } from '../core/tensor';
import { lossOps, trainStepAsync, type LossFn, type TrainInputs } from './train';
import { HOOKS, type BatchLogs, type Callback, type EpochLogs, type FitContext } from './callbacks/types';

/** One batch: the model's forward arguments (a Tensor, or the argument list) and the targets. */
export interface Batch<M extends Module = Module> {
  input: TrainInputs<M>;
  target: Tensor;
}

/**
 * Where batches come from: anything iterable (an array, a generator function's object made anew
 * per pass, a DataLoader), iterated once per epoch. `length` (batches per pass) feeds the progress
 * bar; `setEpoch(epoch)`, when present, is called before each epoch (seeded reshuffling).
 */
export type BatchSource<B = Batch> = (Iterable<B> | AsyncIterable<B>) & {
  readonly length?: number;
  setEpoch?(epoch: number): void;
};

/** Options of fit(). */
export interface FitOptions<M extends Module = Module> {
  /** The last epoch's number (a resumed run continues up to it). */
  epochs: number;
  /** Batches to compute the validation loss and accuracy on after each epoch, in eval mode. */
  validation?: BatchSource<Batch<M>>;
  /** Learning rate per step: `optimizer.options.lr = schedule(step)` before each step (step from 1). */
  schedule?: Schedule;
  /** Hooks called during training (see Callback); built-ins: progressBar, tensorBoard, modelCheckpoint, earlyStopping. */
  callbacks?: readonly Callback[];
  /** The loss (default: crossEntropy over the last axis, see trainStep). */
  loss?: LossFn;
  /** Clip the total gradient norm to this before each update (default: no clipping). */
  maxGradNorm?: number;
  /** A checkpoint written by modelCheckpoint to continue from (at the epoch after its own). */
  resumeFrom?: string;
  /** Replay repeated training steps on 'cuda' as CUDA graphs (default true; see trainStep's `cudaGraphs`). */
  cudaGraphs?: boolean;
}
const FIT_OPTIONS = new OptionKeys<FitOptions>('fit options',
  { epochs: true, validation: true, schedule: true, callbacks: true, loss: true, maxGradNorm: true, resumeFrom: true, cudaGraphs: true });

/** What fit() keeps in a checkpoint's meta to resume. */
interface FitMeta {
  epoch: number;
  history: EpochLogs[];
}

function checkSource(name: string, v: unknown): void {
  const o = v as { [Symbol.iterator]?: unknown; [Symbol.asyncIterator]?: unknown; length?: unknown } | null;
  if (o === null || typeof o !== 'object' || (typeof o[Symbol.iterator] !== 'function' && typeof o[Symbol.asyncIterator] !== 'function'))
    invalidArg(name, 'an iterable or async iterable of {input, target} batches', v);
  if (o.length !== undefined && (!Number.isSafeInteger(o.length) || (o.length as number) < 0))
    invalidArg(`${name}.length`, 'a non-negative integer (batches per epoch)', o.length);
}

function checkBatch(name: string, b: unknown): Batch {
  const o = b as Batch | null;
  if (o === null || typeof o !== 'object' || !(o.target instanceof Tensor) || !(o.input instanceof Tensor || Array.isArray(o.input)))
    invalidArg(name, 'a batch {input: Tensor | forward arguments, target: Tensor}', b);
  if (o.target.shape.length === 0) invalidArg(`${name}.target`, 'a Tensor with a batch dimension', o.target);
  return o;
}

function checkCallbacks(callbacks: unknown): readonly Callback[] {
  if (callbacks === undefined) return [];
  if (!Array.isArray(callbacks)) invalidArg('options.callbacks', 'an array of callbacks', callbacks);
  callbacks.forEach((c: unknown, i) => {
    if (c === null || typeof c !== 'object') invalidArg(`options.callbacks[${i}]`, 'an object with hooks (onEpochEnd, ...)', c);
    for (const h of HOOKS) {
      const f = (c as Record<string, unknown>)[h];
      if (f !== undefined && typeof f !== 'function') invalidArg(`options.callbacks[${i}].${h}`, 'a function', f);
    }
  });
  return callbacks as Callback[];
}

function checkOptions(o: FitOptions): void {
  if (!Number.isSafeInteger(o.epochs) || o.epochs < 1) invalidArg('options.epochs', 'a positive integer', o.epochs);
  if (o.validation !== undefined) checkSource('options.validation', o.validation);
  if (o.schedule !== undefined && typeof o.schedule !== 'function') invalidArg('options.schedule', 'a function of the step', o.schedule);
  if (o.loss !== undefined && typeof o.loss !== 'function') invalidArg('options.loss', 'a function (output, targets) => {loss, grad}', o.loss);
  if (o.cudaGraphs !== undefined && typeof o.cudaGraphs !== 'boolean') invalidArg('options.cudaGraphs', 'a boolean', o.cudaGraphs);
  if (o.maxGradNorm !== undefined && !(typeof o.maxGradNorm === 'number' && o.maxGradNorm > 0))
    invalidArg('options.maxGradNorm', 'a positive number', o.maxGradNorm);
  if (o.resumeFrom !== undefined && (typeof o.resumeFrom !== 'string' || o.resumeFrom.length === 0))
    invalidArg('options.resumeFrom', 'a checkpoint path', o.resumeFrom);
}

function fitMeta(meta: Record<string, unknown> | null, path: string): FitMeta {
  const m = meta?.fit as FitMeta | undefined;
  if (!m || !Number.isSafeInteger(m.epoch) || m.epoch < 0 || !Array.isArray(m.history))
    throw new NodeformerError('ERR_NF_FORMAT', `fit: ${path} holds no fit() state (epoch and history): write it with modelCheckpoint, or restore it with resumeAsync`);
  return m;
}

/** The run as callbacks see it (FitContext), with the counters fit() advances. */
class Run implements FitContext {
  stopTraining = false;
  step = 0;
  epoch = 0;
  history: EpochLogs[] = [];

  constructor(readonly model: Module, readonly optimizer: Optimizer, readonly epochs: number, readonly batchesPerEpoch: number | undefined,
    readonly hasValidation: boolean, public schedule: Schedule | undefined, private readonly callbacks: readonly Callback[]) {}

  checkpointState(): CheckpointState {
    const meta: { fit: FitMeta } = { fit: { epoch: this.epoch, history: this.history } };
    return { model: this.model, optimizer: this.optimizer, step: this.step, meta, ...(this.schedule?.config ? { schedule: this.schedule } : {}) };
  }

  /** Calls one hook of every callback, in order. */
  async emit<H extends (typeof HOOKS)[number]>(hook: H, ...args: Parameters<NonNullable<Callback[H]>> extends [...infer A, FitContext] ? A : never): Promise<void> {
    for (const c of this.callbacks) await (c[hook] as ((...a: unknown[]) => unknown) | undefined)?.call(c, ...args, this);
  }
}

function learningRate(optimizer: Optimizer): number {
  return (optimizer.options as { lr: number }).lr;
}

/** One training pass; returns the epoch's logs. */
async function trainEpoch<M extends Module>(run: Run, train: BatchSource<Batch<M>>, o: FitOptions<M>, lossFn: LossFn): Promise<EpochLogs> {
  const { model, optimizer } = run;
  const epochTally = new HitTally();
  let lossSum = 0, samples = 0, batch = 0;
  const t0 = performance.now();
  for await (const b of train) {
    const { input, target } = checkBatch(`trainLoader batch ${batch}`, b);
    if (run.schedule) (optimizer.options as { lr: number }).lr = run.schedule(run.step + 1);
    const tally = new HitTally();
    const loss = await trainStepAsync(model as M, optimizer, input as TrainInputs<M>, target,
      { loss: lossFn, observe: (output, t) => tally.add(countHits(output, t)), ...(o.maxGradNorm === undefined ? {} : { maxGradNorm: o.maxGradNorm }),
        ...(o.cudaGraphs === undefined ? {} : { cudaGraphs: o.cudaGraphs }) });
    run.step++;
    const n = target.shape[0];
    lossSum += loss * n;
    samples += n;
    const accuracy = tally.accuracy();
    epochTally.add(tally.hits());
    const logs: BatchLogs = { batch: batch++, step: run.step, loss, samples: n, lr: learningRate(optimizer), ...(accuracy === undefined ? {} : { accuracy }) };
    await run.emit('onBatchEnd', logs);
  }
  if (batch === 0)
    invalidArg('trainLoader', `batches in epoch ${run.epoch} (it yielded none; a generator object runs once: pass an iterable that starts a new pass each time)`, train);
  const seconds = (performance.now() - t0) / 1000, accuracy = epochTally.accuracy();
  return { epoch: run.epoch, step: run.step, loss: lossSum / samples, ...(accuracy === undefined ? {} : { accuracy }),
    lr: learningRate(optimizer), samples, seconds, samplesPerSecond: samples / seconds };
}

/** One validation batch: forward in eval mode, loss and hits. */
function* evalOps(model: Module, b: Batch, lossFn: LossFn): Program<{ loss: number; hits: Hits | null }> {
  const args = b.input instanceof Tensor ? [b.input] : (b.input as unknown[]);
  const output = (yield* (model.forwardOps as (...a: unknown[]) => Program<unknown>).apply(model, args)) as Tensor<'float32'>;
  if (!(output instanceof Tensor)) invalidArg('the model output', 'a Tensor (fit validates models that return one)', output);
  try {
    const hits = countHits(output, b.target);
    const { loss, grad } = yield* lossOps(lossFn, output, b.target);
    grad.dispose();
    return { loss, hits };
  } finally {
    output.dispose();
  }
}

/** Validation loss and accuracy over `source`, in eval mode (the mode is restored after). */
async function validate(model: Module, source: BatchSource<Batch>, lossFn: LossFn): Promise<{ valLoss: number; valAccuracy?: number }> {
  const mode = model.training, tally = new HitTally();
  let lossSum = 0, samples = 0, batch = 0;
  model.eval();
  try {
    for await (const raw of source) {
      const b = checkBatch(`validation batch ${batch++}`, raw);
      const r = await model.enqueueOps(() => evalOps(model, b, lossFn));
      tally.add(r.hits);
      lossSum += r.loss * b.target.shape[0];
      samples += b.target.shape[0];
    }
  } finally {
    model.train(mode);
  }
  if (samples === 0) invalidArg('options.validation', 'at least one batch', source);
  const valAccuracy = tally.accuracy();
  return { valLoss: lossSum / samples, ...(valAccuracy === undefined ? {} : { valAccuracy }) };
}

/**
 * Trains `model` with `optimizer` over `trainLoader` for `options.epochs` epochs (see the file
 * comment). Resolves with the history: one EpochLogs per epoch (those of a resumed run first).
 */
export async function fit<M extends Module>(model: M, optimizer: Optimizer, trainLoader: BatchSource<Batch<M>>, options: FitOptions<M>): Promise<EpochLogs[]> {
  if (!(model instanceof Module)) invalidArg('model', 'a Module', model);
  model.checkTrainable('fit');
  if (optimizer === null || typeof optimizer !== 'object' || typeof (optimizer as Optimizer).stepOps !== 'function')
    invalidArg('optimizer', 'an Optimizer (AdamW, SGD)', optimizer);
  checkSource('trainLoader', trainLoader);
  if (options === undefined) invalidArg('options', 'an options object with epochs', options);
  const o = FIT_OPTIONS.check('options', options);
  checkOptions(o);
  const callbacks = checkCallbacks(o.callbacks);
  const lossFn = o.loss ?? crossEntropyOps;
  const run = new Run(model, optimizer, o.epochs, trainLoader.length, o.validation !== undefined, o.schedule, callbacks);
  if (o.resumeFrom !== undefined) {
    const r = await resumeAsync(o.resumeFrom, { model, optimizer });
    const meta = fitMeta(r.meta, o.resumeFrom);
    run.step = r.step;
    run.epoch = meta.epoch;
    run.history = meta.history;
    run.schedule = o.schedule ?? r.schedule ?? undefined;
  }
  await run.emit('onTrainBegin');
  while (run.epoch < o.epochs && !run.stopTraining) {
    run.epoch++;
    trainLoader.setEpoch?.(run.epoch);
    o.validation?.setEpoch?.(run.epoch);
    await run.emit('onEpochBegin', run.epoch);
    const logs = await trainEpoch(run, trainLoader, o, lossFn);
    if (o.validation) Object.assign(logs, await validate(model, o.validation as BatchSource<Batch>, lossFn));
    run.history.push(logs);
    await run.emit('onEpochEnd', logs);
  }
  await run.emit('onTrainEnd', run.history);
  return run.history;
}

