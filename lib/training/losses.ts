/** Training losses; each returns the mean loss and its gradient with respect to the prediction. */
import { invalidArg, NodeformerError } from '../validation/errors';
import { checkFiniteArgs } from '../core/finite';
import { OptionKeys } from '../validation/options';
import { op, runSync, type Program } from '../core/program';
import { checkTensor, Tensor } from '../core/tensor';

/** A loss value and its gradient with respect to the prediction. */
export interface LossResult {
  loss: number;
  grad: Tensor<'float32'>;
}

/**
 * Softmax cross-entropy, PyTorch's F.cross_entropy (mean over targets that are not ignoreIndex):
 * logits [..., V], targets int32 [...] (the logits' shape without V). With labelSmoothing ε the
 * target distribution is (1 − ε) one-hot + ε / V. Returns the loss (NaN if every target is ignored)
 * and grad = d loss / d logits.
 */
export function crossEntropy(logits: Tensor, targets: Tensor, options: CrossEntropyOptions = {}): LossResult {
  return runSync(crossEntropyOps(logits, targets, options));
}

export interface CrossEntropyOptions {
  /** ε in [0, 1] (default 0). */
  labelSmoothing?: number;
  /** Targets equal to this are left out of the mean (default −100). */
  ignoreIndex?: number;
}
const CROSS_ENTROPY_OPTIONS = new OptionKeys<CrossEntropyOptions>('crossEntropy options', { labelSmoothing: true, ignoreIndex: true });

/** Options of mse. */
export interface MseOptions {
  /** Bool, pred's shape without the last dimension; true = the row counts. */
  mask?: Tensor;
}
const MSE_OPTIONS = new OptionKeys<MseOptions>('mse options', { mask: true });

/**
 * Checks every target (a host tensor; a device tensor's are checked by the kernel) is a class index
 * in [0, V) or ignoreIndex: "Expected class indices in [0, 3) ... for targets but received target 7 at row 0".
 */
function checkTargets(t: Tensor<'int32'>, V: number, ignoreIndex: number): void {
  if (t.device !== 'cpu') return;
  const ids = t.data;
  for (let i = 0; i < ids.length; i++)
    if (!(ids[i] >= 0 && ids[i] < V) && ids[i] !== ignoreIndex)
      throw new NodeformerError('ERR_NF_INVALID_ARG', `Expected class indices in [0, ${V}) (the logits have ${V} classes) or ` +
        `ignoreIndex (${ignoreIndex}) for targets but received target ${ids[i]} at ${position(i, t.shape)}`);
}

/** "row 3" for a flat index of a rank-1 shape, "[1, 2]" for higher ranks. */
function position(flat: number, shape: readonly number[]): string {
  if (shape.length <= 1) return `row ${flat}`;
  const idx: number[] = [];
  for (let d = shape.length - 1; d >= 0; d--) {
    idx.unshift(flat % shape[d]);
    flat = Math.floor(flat / shape[d]);
  }
  return `[${idx.join(', ')}]`;
}

/** The program of crossEntropy (for trainStepAsync and custom steps). */
export function* crossEntropyOps(logits: Tensor, targets: Tensor, options: CrossEntropyOptions = {}): Program<LossResult> {
  return readLoss(yield* crossEntropyDeviceOps(logits, targets, options));
}

/** A loss still on the prediction's device ([1]) and its gradient: what a training step reads only at its end. */
export interface DeviceLossResult {
  loss: Tensor<'float32'>;
  grad: Tensor<'float32'>;
}

/** The loss value of `r` (its tensor freed). */
function readLoss(r: DeviceLossResult): LossResult {
  try {
    return { loss: r.loss.toArray()[0], grad: r.grad };
  } finally {
    r.loss.dispose();
  }
}

/** @internal crossEntropyOps leaving the loss on the device (a CUDA graph's step reads it after the replay). */
export function* crossEntropyDeviceOps(logits: Tensor, targets: Tensor, options: CrossEntropyOptions = {}): Program<DeviceLossResult> {
  const l = checkTensor('logits', logits, 'float32');
  if (l.shape.length < 1 || l.shape[l.shape.length - 1] < 1) invalidArg('logits', 'a float32 Tensor [..., V] with V >= 1', l);
  const V = l.shape[l.shape.length - 1], N = l.size / V;
  const t = checkTensor('targets', targets, 'int32', l.shape.slice(0, -1));
  const { labelSmoothing = 0, ignoreIndex = -100 } = CROSS_ENTROPY_OPTIONS.check('options', options);
  if (typeof labelSmoothing !== 'number' || !(labelSmoothing >= 0 && labelSmoothing <= 1))
    invalidArg('options.labelSmoothing', 'a number in [0, 1]', labelSmoothing);
  if (!Number.isInteger(ignoreIndex)) invalidArg('options.ignoreIndex', 'an integer', ignoreIndex);
  checkTargets(t, V, ignoreIndex);
  checkFiniteArgs({ logits: l });
  const loss = Tensor.empty([1], 'float32', l.device), grad = Tensor.empty(l.shape, 'float32', l.device);
  try {
    yield* op('crossEntropy', { N, V, labelSmoothing, ignoreIndex, loss: loss.storage, dlogits: grad.storage, logits: l.storage,
      targets: t.storage });
    return { loss, grad };
  } catch (e) {
    loss.dispose();
    grad.dispose();
    throw e;
  }
}

/**
 * @internal After a CUDA graph's replay gave a NaN cross-entropy: the error an eager step would have
 * thrown for a target out of range (the captured step cannot wait for that check), if any.
 */
export function checkCrossEntropyTargets(logits: Tensor, targets: Tensor, options: CrossEntropyOptions = {}): void {
  const V = logits.shape[logits.shape.length - 1], host = targets.to('cpu') as Tensor<'int32'>;
  try {
    checkTargets(host, V, options.ignoreIndex ?? -100);
  } finally {
    if (host !== targets) host.dispose();
  }
}

/**
 * Mean squared error between pred and target (same shape, same device). With `mask` (bool,
 * pred's shape without the last dimension; true = counts) only the selected rows are scored, as
 * the masked autoencoder scores masked patches. Returns the loss and grad = d loss / d pred (on
 * pred's device).
 */
export function mse(pred: Tensor, target: Tensor, options: MseOptions = {}): LossResult {
  return runSync(mseOps(pred, target, options));
}

/** The program of mse. */
export function* mseOps(pred: Tensor, target: Tensor, options: MseOptions = {}): Program<LossResult> {
  return readLoss(yield* mseDeviceOps(pred, target, options));
}

/** @internal mseOps leaving the loss on the device. */
export function* mseDeviceOps(pred: Tensor, target: Tensor, options: MseOptions = {}): Program<DeviceLossResult> {
  const p = checkTensor('pred', pred, 'float32');
  const t = checkTensor('target', target, 'float32', p.shape);
  const cols = p.shape.length ? p.shape[p.shape.length - 1] : 1;
  const rows = cols === 0 ? 0 : p.size / cols;
  const { mask: m } = MSE_OPTIONS.check('options', options);
  const mask = m === undefined ? null : checkTensor('options.mask', m, 'bool', p.shape.slice(0, -1)).storage;
  checkFiniteArgs({ pred: p, target: t });
  const loss = Tensor.empty([1], 'float32', p.device), grad = Tensor.empty(p.shape, 'float32', p.device);
  try {
    yield* op('mse', { rows, cols, loss: loss.storage, dpred: grad.storage, pred: p.storage, target: t.storage, mask });
    return { loss, grad };
  } catch (e) {
    loss.dispose();
    grad.dispose();
    throw e;
  }
}
