/**
 * One training step as one program: zero the gradients, forward, loss, backward, optional
 * gradient clipping, optimizer step. trainStep runs it on the calling thread; trainStepAsync runs
 * every op on worker threads, queued behind the model's other asynchronous calls, so a training
 * loop leaves the event loop free.
 */
import { invalidArg } from '../validation/errors';
import { crossEntropyOps, type LossResult } from './losses';
import type { Module, ProgramArgs } from '../core/module';
import type { Optimizer } from './optim';
import { OptionKeys } from '../validation/options';
import { op, type Program } from '../core/program';
import { Scope } from '../core/scope';
import { Tensor } from '../core/tensor';

/**
 * A loss over the model output and the targets. It may return {loss, grad} directly (it then runs
 * on the calling thread) or a program of native ops such as crossEntropyOps or mseOps (its ops then
 * run where the step runs).
 */
export type LossFn = (output: Tensor<'float32'>, targets: Tensor) => LossResult | Program<LossResult>;

export interface TrainStepOptions {
  /** The loss (default: crossEntropy over the last dimension, for classifier and Transformer logits). */
  loss?: LossFn;
  /** Clip the total gradient norm to this before the update (default: no clipping). */
  maxGradNorm?: number;
  /**
   * Gradient accumulation over this many calls (default 1): the first call of each cycle zeroes the
   * gradients, every call adds the gradient of loss / accumulate, and the last one clips and updates
   * (the cycle counts this optimizer's trainStep calls). The returned loss is the batch's own.
   */
  accumulate?: number;
}
const TRAIN_STEP_OPTIONS = new OptionKeys<TrainStepOptions>('trainStep options', { loss: true, maxGradNorm: true, accumulate: true });

/** The model's forward arguments: one tensor, or the argument list of its forward (e.g. [src, tgt]). */
export type TrainInputs<M extends Module> = Tensor | ProgramArgs<M['forwardProgram']>;

function isProgram(v: unknown): v is Program<LossResult> {
  return typeof v === 'object' && v !== null && typeof (v as Program<LossResult>).next === 'function' &&
    typeof (v as Program<LossResult>).throw === 'function';
}

type AnyProgramFn = (...args: unknown[]) => Program<unknown>;

/** The loss of `output` as a program, whichever kind `lossFn` is (see LossFn). */
export function* lossOps(lossFn: LossFn, output: Tensor<'float32'>, targets: Tensor): Program<LossResult> {
  const r = lossFn(output, targets);
  return isProgram(r) ? yield* r : r;
}

/** The program of one training step; returns the loss. */
export function* trainStepOps<M extends Module>(
  model: M, optimizer: Optimizer, inputs: TrainInputs<M>, targets: Tensor, options: TrainStepOptions = {},
): Program<number> {
  const args: unknown[] = inputs instanceof Tensor ? [inputs] : (inputs as unknown[]);
  if (!Array.isArray(args)) invalidArg('inputs', 'a Tensor or an array of forward arguments', inputs);
  options = TRAIN_STEP_OPTIONS.check('options', options);
  const lossFn = options.loss ?? crossEntropyOps;
  const k = options.accumulate ?? 1;
  if (!Number.isInteger(k) || k < 1) invalidArg('options.accumulate', 'a positive integer', k);
  if (typeof lossFn !== 'function') invalidArg('options.loss', 'a function (output, targets) => {loss, grad}', lossFn);
  const tmp = new Scope(...args.filter((a): a is Tensor => a instanceof Tensor), targets);
  try {
    if (optimizer.accumulated % k === 0) yield* optimizer.zeroGradOps();
    const output = yield* (model.forwardOps as AnyProgramFn).apply(model, args);
    if (!(output instanceof Tensor) || (output.dtype !== 'float32' && output.dtype !== 'bfloat16'))
      invalidArg('the model output', 'a float32 (or, precision bf16, bfloat16) Tensor (write a custom step for models that return objects)', output);
    tmp.add(output);
    const { loss, grad } = yield* lossOps(lossFn, output as Tensor<'float32'>, targets);
    tmp.addExposed(grad); // made by the loss function, whose author may keep a view of it
    if (k > 1) yield* op('scale', { n: grad.size, x: grad.storage, s: 1 / k });
    // The input gradients (a Tensor, or an object of them) are not the step's result: free them now.
    const inputGrads: unknown = yield* (model.backwardOps as AnyProgramFn).call(model, grad);
    for (const g of inputGrads instanceof Tensor ? [inputGrads] : Object.values(inputGrads ?? {})) if (g instanceof Tensor) tmp.add(g);
    if (++optimizer.accumulated % k !== 0) return loss;
    optimizer.accumulated = 0;
    if (options.maxGradNorm !== undefined) yield* optimizer.clipGradsOps(options.maxGradNorm);
    yield* optimizer.stepOps();
    return loss;
  } finally {
    tmp.close();
  }
}

/**
 * One training step on the calling thread: zeroGrad, forward(inputs), loss(output, targets)
 * (crossEntropy by default), backward, optional clipping, optimizer.step(). Returns the loss.
 */
export function trainStep<M extends Module>(
  model: M, optimizer: Optimizer, inputs: TrainInputs<M>, targets: Tensor, options: TrainStepOptions = {},
): number {
  optimizer.lane.checkIdle('trainStep (its optimizer)');
  return model.runOps('trainStep', trainStepOps(model, optimizer, inputs, targets, options));
}

/**
 * trainStep with every op on a worker thread, queued behind the model's other asynchronous calls:
 * the event loop stays responsive while the model trains. Resolves with the loss. The inputs and
 * targets must stay undisposed until it settles. The optimizer is busy too: its own asynchronous
 * calls queue behind the step, and its synchronous ones (step, zeroGrad, dispose) throw
 * ERR_NF_STATE until the step settles.
 */
export function trainStepAsync<M extends Module>(
  model: M, optimizer: Optimizer, inputs: TrainInputs<M>, targets: Tensor, options: TrainStepOptions = {},
): Promise<number> {
  return model.enqueueOps(() => trainStepOps(model, optimizer, inputs, targets, options), optimizer.lane);
}
