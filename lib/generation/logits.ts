/**
 * Functions on logits along the last axis, as native ops (native/ops/logits.h): softmax,
 * logSoftmax, argmax and topk of a float32 tensor [..., V], on its device. Each comes synchronous,
 * as an `...Async` twin that runs the op on a worker thread, and as a program (`...Ops`) for code
 * that composes ops (lib/core/program.ts). Forward only: they are not differentiable module functions.
 * argmax and topk order values as PyTorch does: larger first, NaN above every number, equal values
 * by lower index.
 */
import { invalidArg } from '../validation/errors';
import { op, runAsync, runSync, type Program } from '../core/program';
import { checkTensor, Tensor } from '../core/tensor';

/** The result of topk: the k largest values of each row, descending, and their int32 indices. */
export interface TopK {
  /** [..., k] float32. */
  values: Tensor<'float32'>;
  /** [..., k] int32, positions along the last axis. */
  indices: Tensor<'int32'>;
}

/** Checks a float32 tensor [..., V] with V >= 1; returns it with its row count and width. */
function rowsOf(name: string, t: unknown): { x: Tensor<'float32'>; rows: number; cols: number } {
  const x = checkTensor(name, t, 'float32');
  const cols = x.shape[x.shape.length - 1];
  if (x.shape.length < 1 || !(cols >= 1)) invalidArg(name, 'a float32 Tensor [..., V] with V >= 1', x);
  return { x, rows: x.size / cols, cols };
}

/** Runs `request` (an op writing `outs`) and returns `result`; frees `outs` if the op fails. */
function* writing<R>(outs: Tensor[], request: Program<void>, result: R): Program<R> {
  try {
    yield* request;
    return result;
  } catch (e) {
    for (const t of outs) t.dispose();
    throw e;
  }
}

/** The program of softmax. */
export function* softmaxOps(logits: Tensor): Program<Tensor<'float32'>> {
  const { x, rows, cols } = rowsOf('logits', logits);
  const out = Tensor.empty(x.shape, 'float32', x.device);
  return yield* writing([out], op('softmax', { rows, cols, out: out.storage, x: x.storage }), out);
}

/** The program of logSoftmax. */
export function* logSoftmaxOps(logits: Tensor): Program<Tensor<'float32'>> {
  const { x, rows, cols } = rowsOf('logits', logits);
  const out = Tensor.empty(x.shape, 'float32', x.device);
  return yield* writing([out], op('logSoftmax', { rows, cols, out: out.storage, x: x.storage }), out);
}

/** The program of argmax. */
export function* argmaxOps(logits: Tensor): Program<Tensor<'int32'>> {
  const { x, rows, cols } = rowsOf('logits', logits);
  const out = Tensor.empty(x.shape.slice(0, -1), 'int32', x.device);
  return yield* writing([out], op('argmax', { rows, cols, out: out.storage, x: x.storage }), out);
}

/** The program of topk. */
export function* topkOps(logits: Tensor, k: number): Program<TopK> {
  const { x, rows, cols } = rowsOf('logits', logits);
  if (!Number.isInteger(k) || k < 1 || k > cols) invalidArg('k', `an integer in [1, ${cols}] (the last axis of logits)`, k);
  const shape = [...x.shape.slice(0, -1), k];
  const values = Tensor.empty(shape, 'float32', x.device), indices = Tensor.empty(shape, 'int32', x.device);
  return yield* writing([values, indices], op('topk', { rows, cols, k, values: values.storage, indices: indices.storage,
    x: x.storage }), { values, indices });
}

/** softmax(logits) along the last axis: float32 [..., V] → probabilities [..., V] (a new tensor on logits' device). */
export function softmax(logits: Tensor): Tensor<'float32'> {
  return runSync(softmaxOps(logits));
}
/** softmax with the op on a worker thread. */
export function softmaxAsync(logits: Tensor): Promise<Tensor<'float32'>> {
  return runAsync(softmaxOps(logits));
}

/** log_softmax(logits) along the last axis: float32 [..., V] → log-probabilities [..., V]. */
export function logSoftmax(logits: Tensor): Tensor<'float32'> {
  return runSync(logSoftmaxOps(logits));
}
/** logSoftmax with the op on a worker thread. */
export function logSoftmaxAsync(logits: Tensor): Promise<Tensor<'float32'>> {
  return runAsync(logSoftmaxOps(logits));
}

/**
 * The index of the largest value along the last axis: float32 [..., V] → int32 [...] (shape [] for
 * a vector): the first index on ties, the first NaN when there is one (as PyTorch).
 */
export function argmax(logits: Tensor): Tensor<'int32'> {
  return runSync(argmaxOps(logits));
}
/** argmax with the op on a worker thread. */
export function argmaxAsync(logits: Tensor): Promise<Tensor<'int32'>> {
  return runAsync(argmaxOps(logits));
}

/**
 * The k largest values along the last axis and their indices, sorted descending (PyTorch's
 * topk(k, dim=-1)): float32 [..., V] → values float32 [..., k], indices int32 [..., k]; 1 <= k <= V.
 */
export function topk(logits: Tensor, k: number): TopK {
  return runSync(topkOps(logits, k));
}
/** topk with the op on a worker thread. */
export function topkAsync(logits: Tensor, k: number): Promise<TopK> {
  return runAsync(topkOps(logits, k));
}
