/**
 * CUDA graphs: a call on 'cuda' that repeats with the same shapes — a training step (trainStep,
 * trainStepAsync, fit) or an eval-mode forward (Module.forward, forwardAsync) — runs eagerly the
 * first time, is captured as one CUDA graph the second time, and is replayed from then on: one
 * launch instead of one per kernel and no JS between the kernels (PyTorch needs torch.compile's
 * reduce-overhead mode for this). Replays give the eager results bit for bit.
 *
 * How (native/cuda/device.h, CUDA graphs): the capture copies the call's input tensors into tensors
 * the graph owns and runs the call's program with the backend stream capturing, so its kernels,
 * copies and fills are recorded, not run, with their memory from a private pool that stays the
 * graph's; the tensors the program returns (a loss, logits) become the graph's outputs. A replay
 * copies the new inputs into the graph's, fills the step values, launches, and reads the outputs.
 * Step values (native/ops/step_values.h) are what changes from step to step without changing
 * shapes — dropout seeds, AdamW's step count and learning rate (a schedule's) — which the captured
 * ops read from a small device table instead of their arguments: the code that would draw one
 * (stepValue) registers how to draw it, and every replay draws them all again in the same order, so
 * the random streams and counters advance exactly as eager steps advance them.
 *
 * What cannot be captured runs eagerly, with the reason kept (cudaGraphStats().fallbacks): a call
 * that reads device values on the host mid-call (checkFinite mode, a custom loss function, an op
 * that checks ids on the host), a step value an op cannot read from the table (attention-weight
 * dropout, SGD), gradient accumulation. A graph is dropped, and the call captured again after one
 * eager run, when a key of it changes: input shapes or dtypes, the model or optimizer, a parameter's
 * or state buffer's storage (module.to), the precision, train/eval mode, options other than the
 * learning rate; and when a scratch buffer it uses moved (ERR_NF_GRAPH_STALE).
 *
 * Off: setCudaGraphs(false), NF_CUDA_GRAPHS=0 in the environment, or `cudaGraphs: false` in
 * trainStep's / fit()'s options.
 */
import { NodeformerError } from '../validation/errors';
import { cuda, type DeviceBuffer } from './device';
import { runSync, type Program } from './program';
import { Tensor } from './tensor';

let enabled = !/^(0|false|off|no)$/i.test(process.env.NF_CUDA_GRAPHS ?? '');

/** Turns CUDA graphs on or off for the whole process (initially off when the environment sets NF_CUDA_GRAPHS=0). */
export function setCudaGraphs(on: boolean): void {
  if (typeof on !== 'boolean') throw new NodeformerError('ERR_NF_INVALID_ARG', `Expected a boolean for on but received ${String(on)}`);
  enabled = on;
}

/** Whether CUDA graphs are on (setCudaGraphs, NF_CUDA_GRAPHS). */
export function cudaGraphsEnabled(): boolean {
  return enabled;
}

/** What the graph runners did since the process started (replays are the calls that ran as one launch). */
export interface CudaGraphStats {
  /** Graphs captured. */
  captures: number;
  /** Calls run as a replay of a captured graph. */
  replays: number;
  /** Calls run eagerly while graphs were on (the first of each shape, and those that cannot be captured). */
  eager: number;
  /** Why calls ran eagerly instead of being captured: reason → how many calls. */
  fallbacks: Record<string, number>;
}

const stats: CudaGraphStats = { captures: 0, replays: 0, eager: 0, fallbacks: {} };

/** A copy of the graph runners' counters. */
export function cudaGraphStats(): CudaGraphStats {
  return { ...stats, fallbacks: { ...stats.fallbacks } };
}

/** How many step values one graph may hold (8 KiB of device memory). */
const STEP_VALUES = 1024;

/** A capture's step values: how to draw each, the host copy of this step's, and the device table. */
class StepValues {
  readonly host = new Float64Array(STEP_VALUES);
  readonly device: DeviceBuffer = cuda().alloc(STEP_VALUES * 8, 'zero');
  private readonly draws: (() => number)[] = [];
  /** What runs on the host before each replay (after the step values) and after it (onReplay). */
  readonly before: (() => void)[] = [];
  readonly after: (() => void)[] = [];

  add(draw: () => number): number {
    if (this.draws.length === STEP_VALUES) uncapturable(`more than ${STEP_VALUES} step values`);
    return this.draws.push(draw) - 1;
  }

  /** Draws every value for the next step, in the order the capture registered them, and uploads them. */
  refill(): void {
    this.draws.forEach((draw, i) => (this.host[i] = draw()));
    cuda().upload(this.device, new Uint8Array(this.host.buffer));
  }

  free(): void {
    cuda().free(this.device);
  }
}

/** The step values of the capture in progress (null when none is). */
let capturing: StepValues | null = null;

/** Thrown (only while capturing) by code that cannot be captured; the call then runs eagerly. */
class Uncapturable extends Error {}

/** Whether a CUDA graph capture is in progress (ops are then recorded, not run). */
export function graphCapturing(): boolean {
  return capturing !== null;
}

/** @internal The capture in progress, as an identity (null when none is): what a value derived once per capture compares. */
export function captureInProgress(): object | null {
  return capturing;
}

/** Under capture, stops it: the call runs eagerly with `reason` kept (cudaGraphStats().fallbacks). */
export function uncapturable(reason: string): void {
  if (capturing) throw new Uncapturable(reason);
}

/** The fields of an op's step value (see stepValue): its index field and the table. */
export type StepValueFields = Partial<Record<'seedAt' | 'stepAt' | 'lrAt', number>> & { stepValues?: DeviceBuffer };

/**
 * A value that changes every step, for an op's argument: eagerly `draw()` itself (no fields); under
 * capture `placeholder` (what the recorded op is given, never used) and the fields that make the op
 * read it from the step table, where every replay puts a fresh `draw()`.
 */
export function stepValue(field: 'seedAt' | 'stepAt' | 'lrAt', draw: () => number, placeholder: number): { value: number; fields: StepValueFields } {
  if (!capturing) return { value: draw(), fields: {} };
  return { value: placeholder, fields: { [field]: capturing.add(draw), stepValues: capturing.device } };
}

/**
 * Under capture, registers host work around every replay of the graph: `before` runs before it is
 * launched (eager work it queues runs first: a bf16 weight copy recast when its parameter changed
 * outside the graph), `after` once it is queued (bookkeeping: the parameters the graph's optimizer
 * wrote). Nothing happens outside a capture.
 */
export function onReplay(hooks: { before?: () => void; after?: () => void }): void {
  if (!capturing) return;
  if (hooks.before) capturing.before.push(hooks.before);
  if (hooks.after) capturing.after.push(hooks.after);
}

/** What a capture keeps: the graph, its step values, its input tensors and the tensors the program returned. */
export class CapturedCall {
  private constructor(private handle: object | null, private readonly values: StepValues,
    readonly inputs: readonly Tensor[], readonly outputs: readonly Tensor[]) {}

  /**
   * Captures `program(inputs')` where inputs' are copies of `inputs` that the graph keeps. Returns
   * the capture, or the reason it could not be made (nothing has run then, and no host state the
   * program would have changed through stepValue has changed).
   */
  static capture(inputs: readonly Tensor[], program: (inputs: Tensor[]) => Program<Tensor[]>): CapturedCall | string {
    const own = inputs.map((t) => Tensor.empty(t.shape, t.dtype, 'cuda'));
    own.forEach((t, i) => cuda().copy(t.storage as DeviceBuffer, inputs[i].storage as DeviceBuffer));
    const values = new StepValues();
    let outputs: Tensor[] | null = null, failure: unknown = null;
    cuda().graphBegin();
    capturing = values;
    try {
      outputs = runSync(program(own));
    } catch (e) {
      failure = e;
    } finally {
      capturing = null;
    }
    let handle: object | null = null;
    try {
      handle = cuda().graphEnd(); // (ends the capture even when the program failed)
    } catch (e) {
      failure ??= e;
    }
    if (failure === null && handle !== null) return new CapturedCall(handle, values, own, outputs!);
    if (handle) cuda().graphFree(handle);
    for (const t of [...own, ...(outputs ?? [])]) t.dispose();
    values.free();
    if (failure instanceof Uncapturable) return failure.message;
    const e = failure as { code?: string; message?: string };
    return `${e?.code ?? 'error'} during capture: ${e?.message ?? String(failure)}`;
  }

  /**
   * Queues a replay on `inputs`: copies them into the graph's inputs, draws the step values,
   * launches. False when the graph is stale (a scratch buffer it uses moved, ERR_NF_GRAPH_STALE):
   * nothing ran and no step value was drawn; drop it and run the call eagerly.
   */
  launch(inputs: readonly Tensor[]): boolean {
    if (!this.prepare(inputs)) return false;
    cuda().graphLaunch(this.handle!);
    stats.replays++;
    for (const f of this.values.after) f();
    return true;
  }

  /** launch() that settles once the stream has run the graph (the event loop stays free). */
  async launchAsync(inputs: readonly Tensor[]): Promise<boolean> {
    if (!this.prepare(inputs)) return false;
    await cuda().graphLaunchAsync(this.handle!);
    stats.replays++;
    for (const f of this.values.after) f();
    return true;
  }

  /** Copies the inputs and fills the step values; false (nothing done) when the graph is stale. */
  private prepare(inputs: readonly Tensor[]): boolean {
    if (!this.handle) throw new NodeformerError('ERR_NF_STATE', 'the CUDA graph was freed');
    if (!cuda().graphFresh(this.handle)) return false;
    inputs.forEach((t, i) => cuda().copy(this.inputs[i].storage as DeviceBuffer, t.storage as DeviceBuffer));
    this.values.refill();
    for (const f of this.values.before) f();
    return true;
  }

  /** Frees the graph (its memory pool goes back to the cache), its step table, inputs and outputs. */
  free(): void {
    if (!this.handle) return;
    cuda().graphFree(this.handle);
    this.handle = null;
    this.values.free();
    for (const t of [...this.inputs, ...this.outputs]) t.dispose();
  }
}

/** One key's state: runs seen, its capture, or why it runs eagerly. */
interface Entry {
  seen: number;
  call?: CapturedCall;
  reason?: string;
}

/** The most graphs one runner keeps (the oldest is freed): e.g. an epoch's full batches and its last, smaller one. */
const KEPT = 2;

/**
 * The graphs of one kind of call on one owner (a model's forward, a model-and-optimizer's step),
 * by key: what `next(key)` says to do with a call, and the capture once made.
 */
export class GraphRunner {
  private readonly entries = new Map<string, Entry>();

  /**
   * What to do with a call of `key`: 'eager' (graphs off, the first call of a key, or a key that
   * cannot be captured: counted), 'capture', or the capture to replay.
   */
  next(key: string): 'eager' | 'capture' | CapturedCall {
    const e = this.entries.get(key);
    if (e?.call) {
      this.entries.delete(key); // (most recent last)
      this.entries.set(key, e);
      return e.call;
    }
    if (e?.reason !== undefined) return this.eager(e.reason);
    if (!e) {
      this.entries.set(key, { seen: 1 });
      this.evict();
      return this.eager(null);
    }
    return 'capture';
  }

  /** Records the outcome of a capture of `key` (a CapturedCall, or the reason it failed). */
  captured(key: string, result: CapturedCall | string): void {
    const e = this.entries.get(key) ?? { seen: 1 };
    if (typeof result === 'string') {
      e.reason = result;
      this.eager(result);
    } else {
      e.call = result;
      stats.captures++;
    }
    this.entries.set(key, e);
  }

  /** Counts a call that runs eagerly, with its reason (none: the warm-up run of a new key). */
  eager(reason: string | null): 'eager' {
    stats.eager++;
    if (reason !== null) stats.fallbacks[reason] = (stats.fallbacks[reason] ?? 0) + 1;
    return 'eager';
  }

  /** Drops the capture of `key` (its next call runs eagerly, the one after is captured again). */
  drop(key: string): void {
    this.entries.get(key)?.call?.free();
    this.entries.delete(key);
  }

  /** Frees every capture. */
  clear(): void {
    for (const key of [...this.entries.keys()]) this.drop(key);
  }

  private evict(): void {
    while (this.entries.size > KEPT) this.drop(this.entries.keys().next().value!);
  }
}

/** A stable small number per object (models, optimizers, loss functions, storages) for graph keys. */
const ids = new WeakMap<object, number>();
let nextId = 1;
export function objectId(o: object): number {
  let id = ids.get(o);
  if (id === undefined) ids.set(o, (id = nextId++));
  return id;
}

/** "float32[2,3]@cuda" for each tensor: the shape part of a key. */
export function tensorKey(ts: readonly Tensor[]): string {
  return ts.map((t) => `${t.dtype}[${t.shape.join(',')}]@${t.device}`).join(';');
}
