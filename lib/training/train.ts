/**
 * One training step as one program: zero the gradients, forward, loss, backward, optional
 * gradient clipping, optimizer step. trainStep runs it on the calling thread; trainStepAsync runs
 * every op on worker threads, queued behind the model's other asynchronous calls, so a training
 * loop leaves the event loop free. On 'cuda' a step that repeats with the same shapes is captured
 * as a CUDA graph and replayed (lib/core/graph.ts; off with `cudaGraphs: false`).
 */
import { invalidArg } from '../validation/errors';
import { checkFiniteEnabled } from '../core/finite';
import { CapturedCall, cudaGraphsEnabled, objectId, tensorKey } from '../core/graph';
import { checkCrossEntropyTargets, crossEntropyDeviceOps, crossEntropyOps, mseDeviceOps, mseOps, type DeviceLossResult, type LossResult } from './losses';
import type { Module, ProgramArgs } from '../core/module';
import type { Optimizer } from './optim';
import { OptionKeys } from '../validation/options';
import { op, runAsync, type Program } from '../core/program';
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
  /**
   * Capture the step as a CUDA graph once it repeats with the same shapes, and replay it (default
   * true; on 'cuda' only; see lib/core/graph.ts). False runs every step eagerly, as does
   * setCudaGraphs(false) or NF_CUDA_GRAPHS=0.
   */
  cudaGraphs?: boolean;
  /** @internal Called with the step's output and targets after the step (fit()'s accuracy). */
  observe?: (output: Tensor<'float32'>, targets: Tensor) => void;
}
const TRAIN_STEP_OPTIONS = new OptionKeys<TrainStepOptions>('trainStep options',
  { loss: true, maxGradNorm: true, accumulate: true, cudaGraphs: true, observe: true });

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

/** The built-in losses and their twins that leave the loss on the device (what a captured step needs). */
const DEVICE_LOSSES = new Map<LossFn, (output: Tensor<'float32'>, targets: Tensor) => Program<DeviceLossResult>>([
  [crossEntropyOps, crossEntropyDeviceOps],
  [mseOps, mseDeviceOps],
]);

/** trainStep's options, checked, with the loss function. */
interface StepOptions extends TrainStepOptions {
  lossFn: LossFn;
  k: number;
}

function stepOptions(options: TrainStepOptions): StepOptions {
  const o = TRAIN_STEP_OPTIONS.check('options', options);
  const lossFn = o.loss ?? crossEntropyOps;
  const k = o.accumulate ?? 1;
  if (!Number.isInteger(k) || k < 1) invalidArg('options.accumulate', 'a positive integer', k);
  if (typeof lossFn !== 'function') invalidArg('options.loss', 'a function (output, targets) => {loss, grad}', lossFn);
  if (o.cudaGraphs !== undefined && typeof o.cudaGraphs !== 'boolean') invalidArg('options.cudaGraphs', 'a boolean', o.cudaGraphs);
  if (o.observe !== undefined && typeof o.observe !== 'function') invalidArg('options.observe', 'a function', o.observe);
  return { ...o, lossFn, k };
}

function argsOf(inputs: unknown): unknown[] {
  const args: unknown[] = inputs instanceof Tensor ? [inputs] : (inputs as unknown[]);
  if (!Array.isArray(args)) invalidArg('inputs', 'a Tensor or an array of forward arguments', inputs);
  return args;
}

/**
 * The step itself: returns the loss (a device tensor [1] for the built-in losses, else the loss
 * function's number) and the model output, both the caller's to free.
 */
function* stepCoreOps<M extends Module>(model: M, optimizer: Optimizer, args: unknown[], targets: Tensor, o: StepOptions):
  Program<{ loss: Tensor<'float32'> | number; output: Tensor<'float32'> }> {
  const tmp = new Scope(...args.filter((a): a is Tensor => a instanceof Tensor), targets);
  let kept: Tensor[] = [];
  try {
    if (optimizer.accumulated % o.k === 0) yield* optimizer.zeroGradOps();
    const output = yield* (model.forwardOps as AnyProgramFn).apply(model, args);
    if (!(output instanceof Tensor) || (output.dtype !== 'float32' && output.dtype !== 'bfloat16'))
      invalidArg('the model output', 'a float32 (or, precision bf16, bfloat16) Tensor (write a custom step for models that return objects)', output);
    tmp.add(output);
    const onDevice = DEVICE_LOSSES.get(o.lossFn);
    const r = onDevice ? yield* onDevice(output as Tensor<'float32'>, targets) : yield* lossOps(o.lossFn, output as Tensor<'float32'>, targets);
    const { loss, grad } = r;
    if (loss instanceof Tensor) tmp.add(loss);
    tmp.addExposed(grad); // made by the loss function, whose author may keep a view of it
    if (o.k > 1) yield* op('scale', { n: grad.size, x: grad.storage, s: 1 / o.k });
    // The input gradients (a Tensor, or an object of them) are not the step's result: free them now.
    const inputGrads: unknown = yield* (model.backwardOps as AnyProgramFn).call(model, grad);
    for (const g of inputGrads instanceof Tensor ? [inputGrads] : Object.values(inputGrads ?? {})) if (g instanceof Tensor) tmp.add(g);
    if (++optimizer.accumulated % o.k === 0) {
      optimizer.accumulated = 0;
      if (o.maxGradNorm !== undefined) yield* optimizer.clipGradsOps(o.maxGradNorm, false);
      yield* optimizer.stepOps();
    }
    kept = loss instanceof Tensor ? [loss, output as Tensor] : [output as Tensor];
    return { loss, output: output as Tensor<'float32'> };
  } finally {
    tmp.close(...kept);
  }
}

/** The program of one training step; returns the loss. */
export function* trainStepOps<M extends Module>(
  model: M, optimizer: Optimizer, inputs: TrainInputs<M>, targets: Tensor, options: TrainStepOptions = {},
): Program<number> {
  const args = argsOf(inputs);
  const o = stepOptions(options);
  const { loss, output } = yield* stepCoreOps(model, optimizer, args, targets, o);
  try {
    const value = loss instanceof Tensor ? loss.toArray()[0] : loss; // (read once the whole step is queued)
    o.observe?.(output, targets);
    return value;
  } finally {
    output.dispose();
    if (loss instanceof Tensor) loss.dispose();
  }
}

/**
 * How this step runs: eagerly (the program), as a capture, or as a replay; with the graph key.
 * A reason is counted for steps that could be captured but are not (cudaGraphStats().fallbacks).
 */
function planStep<M extends Module>(model: M, optimizer: Optimizer, args: unknown[], targets: Tensor, o: StepOptions):
  { how: 'eager' } | { how: 'capture' | 'replay'; key: string; call?: CapturedCall } {
  if (o.cudaGraphs === false || !cudaGraphsEnabled() || targets.device !== 'cuda' || model.device !== 'cuda') return { how: 'eager' };
  const runner = optimizer.graphs;
  const reason = !args.every((a) => a instanceof Tensor && a.device === 'cuda') ? 'forward arguments other than cuda tensors'
    : checkFiniteEnabled() ? 'checkFinite mode (it reads values on the host)'
    : o.k > 1 ? 'gradient accumulation'
    : !DEVICE_LOSSES.has(o.lossFn) ? 'a custom loss function (it may read values on the host; use crossEntropyOps or mseOps)'
    : null;
  if (reason !== null) return (runner.eager(reason), { how: 'eager' });
  const key = [objectId(model), objectId(o.lossFn), tensorKey([...(args as Tensor[]), targets]), model.precision, model.training,
    o.maxGradNorm ?? '-', optimizer.graphKey()].join('|');
  const next = runner.next(key);
  return next === 'eager' ? { how: 'eager' } : next === 'capture' ? { how: 'capture', key } : { how: 'replay', key, call: next };
}

/** Captures the step of `key` (the next launch runs it); null when it cannot be captured (then run it eagerly). */
function captureStep<M extends Module>(model: M, optimizer: Optimizer, args: Tensor[], targets: Tensor, o: StepOptions, key: string):
  CapturedCall | null {
  const result = CapturedCall.capture([...args, targets], (own) => (function* () {
    const { loss, output } = yield* stepCoreOps(model, optimizer, own.slice(0, -1), own[own.length - 1], o);
    return [loss as Tensor, output];
  })());
  optimizer.graphs.captured(key, result);
  return typeof result === 'string' ? null : result;
}

/**
 * After a replay: the loss, fit()'s observer, and a bad target reported as eager would. (The parameters the
 * graph's optimizer wrote were marked written as it was queued: onReplay, Optimizer.stepList.)
 */
function afterReplay(call: CapturedCall, o: StepOptions): number {
  const [lossT, output] = call.outputs as Tensor<'float32'>[];
  const loss = lossT.toArray()[0];
  const targets = call.inputs[call.inputs.length - 1];
  if (!Number.isFinite(loss) && o.lossFn === crossEntropyOps) checkCrossEntropyTargets(output, targets);
  o.observe?.(output, targets);
  return loss;
}

/**
 * One training step on the calling thread: zeroGrad, forward(inputs), loss(output, targets)
 * (crossEntropy by default), backward, optional clipping, optimizer.step(). Returns the loss.
 * On 'cuda' a step that repeats with the same shapes runs as a CUDA graph (options.cudaGraphs).
 */
export function trainStep<M extends Module>(
  model: M, optimizer: Optimizer, inputs: TrainInputs<M>, targets: Tensor, options: TrainStepOptions = {},
): number {
  optimizer.lane.checkIdle('trainStep (its optimizer)');
  model.checkTrainable('trainStep');
  const args = argsOf(inputs), o = stepOptions(options);
  const plan = planStep(model, optimizer, args, targets, o);
  const eager = () => model.runOps('trainStep', trainStepOps(model, optimizer, inputs, targets, options));
  if (plan.how === 'eager') return eager();
  // (A program without ops, so runOps checks the model is idle as for an eager step.)
  const call = model.runOps('trainStep', (function* () {
    return plan.call ?? captureStep(model, optimizer, args as Tensor[], targets, o, plan.key);
  })());
  if (!call) return eager();
  if (!call.launch([...(args as Tensor[]), targets])) {
    optimizer.graphs.drop(plan.key);
    return eager();
  }
  return afterReplay(call, o);
}

/**
 * trainStep with every op on a worker thread, queued behind the model's other asynchronous calls:
 * the event loop stays responsive while the model trains. Resolves with the loss. The inputs and
 * targets must stay undisposed until it settles. The optimizer is busy too: its own asynchronous
 * calls queue behind the step, and its synchronous ones (step, zeroGrad, dispose) throw
 * ERR_NF_STATE until the step settles. A replayed CUDA graph settles the same way; the step that
 * captures one runs on the calling thread.
 */
export function trainStepAsync<M extends Module>(
  model: M, optimizer: Optimizer, inputs: TrainInputs<M>, targets: Tensor, options: TrainStepOptions = {},
): Promise<number> {
  try {
    model.checkTrainable('trainStepAsync');
  } catch (e) {
    return Promise.reject(e);
  }
  return model.enqueueTask(async () => {
    const args = argsOf(inputs), o = stepOptions(options);
    const plan = planStep(model, optimizer, args, targets, o);
    const eager = () => runAsync(trainStepOps(model, optimizer, inputs, targets, options));
    if (plan.how === 'eager') return eager();
    const call = plan.call ?? captureStep(model, optimizer, args as Tensor[], targets, o, plan.key);
    if (!call) return eager();
    if (!(await call.launchAsync([...(args as Tensor[]), targets]))) {
      optimizer.graphs.drop(plan.key);
      return eager();
    }
    return afterReplay(call, o);
  }, optimizer.lane);
}
