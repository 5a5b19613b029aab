/**
 * Programs: module code written once, run synchronously or off the main thread. A program is a
 * generator that yields native op requests ({op, args}) and returns its result; modules delegate
 * to their children with `yield*`. runSync calls `native[op](args)` for each request; runAsync
 * awaits `native[op + 'Async'](args)`, which runs the op on a libuv worker thread (plain arrays
 * and numbers in, no JS touched off the main thread), so only the light JS between ops runs on
 * the event loop. An op that fails is thrown into the program, so its try/finally blocks run.
 *
 * Devices: the same request runs on the CUDA addon when its arrays are device buffers (tensors on
 * 'cuda', lib/core/device.ts); opFunction is the one place that decides, and an op whose arrays live on
 * both devices is an error (ERR_NF_DEVICE) naming them. Until a CUDA buffer exists in the process,
 * every op goes straight to the CPU addon.
 *
 * Memory: each run has a pool of the host buffers its intermediates free (lib/core/recycle.ts), so the
 * run's next tensors of those sizes reuse them instead of allocating; the pool is freed when the run ends.
 */
import { NodeformerError } from '../validation/errors';
import { cuda, cudaInUse, isDeviceBuffer, type DeviceBuffer } from './device';
import { native, type NativeBinding } from '../native/addon';
import type { NativeOps } from '../native/ops.generated';
import { HostPool, inPool } from './recycle';

/** The ops a program can request: the CPU addon's (every op of the op table, native/ops/). */
type Ops = NativeBinding;

/** Names of the ops that have an `...Async` twin. */
export type OpName = {
  [K in keyof Ops & string]: `${K}Async` extends keyof Ops ? K : never;
}[keyof Ops & string];

/** The options object of op `K` in a program: its tensor fields host arrays or device buffers (Tensor.storage). */
export type OpArgs<K extends OpName> = Parameters<NativeOps<DeviceBuffer>[K]>[0];

/** One native op to run. */
export interface OpRequest {
  readonly op: OpName;
  readonly args: object;
}

/** A generator of op requests returning T; run it with runSync or runAsync. */
export type Program<T> = Generator<OpRequest, T, undefined>;

/** The program of a single op: `yield* op('layernormForward', {...})`. */
export function* op<K extends OpName>(name: K, args: OpArgs<K>): Program<void> {
  yield { op: name, args: args as object };
}

type RawOp = (args: object) => unknown;

/** Host ops (registerHostOp): name and its Async twin → the function that runs it. */
const hostOps: Record<string, RawOp> = {};

/**
 * Registers a host op: `name` runs `sync` under runSync and `async` (awaited) under runAsync.
 * Programs request it like a native op ({ op: name, args }); for ops that are not kernels, such as
 * waiting for a collective (lib/distributed/ddp.ts).
 */
export function registerHostOp(name: string, sync: (args: object) => void, async: (args: object) => Promise<void>): void {
  hostOps[name] = sync;
  hostOps[`${name}Async`] = async;
}

/**
 * The function that runs `name` (an op or its Async twin) on the arguments of request `req`: the
 * CUDA addon's when the arrays are device buffers, else the CPU addon's (or a host op).
 */
function opFunction(req: OpRequest, name: string): RawOp {
  if (cudaInUse()) {
    const onDevice: string[] = [], onHost: string[] = [];
    for (const [field, v] of Object.entries(req.args))
      for (const e of Array.isArray(v) ? v : [v]) { // (a tensor list: its entries)
        if (isDeviceBuffer(e)) onDevice.push(field);
        else if (ArrayBuffer.isView(e)) onHost.push(field);
        else continue;
        break;
      }
    if (onDevice.length) {
      const fn = (cuda() as unknown as Record<string, RawOp | undefined>)[name];
      if (!fn) throw new NodeformerError('ERR_NF_DEVICE', `${req.op} has no CUDA implementation yet: run it on cpu`);
      if (onHost.length)
        throw new NodeformerError('ERR_NF_DEVICE', `${req.op}: expected every tensor on one device, but ${onDevice.join(', ')} ` +
          `${onDevice.length > 1 ? 'are' : 'is'} on cuda and ${onHost.join(', ')} ${onHost.length > 1 ? 'are' : 'is'} on cpu; ` +
          "move them with .to('cuda') or .to('cpu') (module.to(device) for a model)");
      return fn;
    }
  }
  return (native as unknown as Record<string, RawOp | undefined>)[name] ?? hostOps[name];
}

/**
 * Resumes `program` with the run's pool of recycled host buffers current (lib/core/recycle.ts): after
 * its last op, or with that op's error thrown into it.
 */
function resume<T>(program: Program<T>, pool: HostPool, error: { value: unknown } | null): IteratorResult<OpRequest, T> {
  return inPool(pool, () => (error ? program.throw(error.value) : program.next()));
}

/** Runs a program on the calling thread. */
export function runSync<T>(program: Program<T>): T {
  const pool = new HostPool();
  try {
    let step = resume(program, pool, null);
    while (!step.done) {
      let error: { value: unknown } | null = null;
      try {
        opFunction(step.value, step.value.op)(step.value.args);
      } catch (e) {
        error = { value: e };
      }
      step = resume(program, pool, error);
    }
    return step.value;
  } finally {
    pool.drain();
  }
}

/** Runs a program with every op on a worker thread; resolves with its result. */
export async function runAsync<T>(program: Program<T>): Promise<T> {
  const pool = new HostPool();
  try {
    let step = resume(program, pool, null);
    while (!step.done) {
      let error: { value: unknown } | null = null;
      try {
        await opFunction(step.value, `${step.value.op}Async`)(step.value.args);
      } catch (e) {
        error = { value: e };
      }
      step = resume(program, pool, error);
    }
    return step.value;
  } finally {
    pool.drain();
  }
}

/**
 * A queue of asynchronous calls that share state (one model, one optimizer): each call starts
 * when the previous one has settled. While calls are queued or running, synchronous calls on the
 * same state throw ERR_NF_STATE instead of interleaving with them.
 */
export class Lane {
  private tail: Promise<unknown> = Promise.resolve();
  private pending = 0;

  /** Queued or running calls. */
  get busy(): boolean {
    return this.pending > 0;
  }

  /**
   * Runs `program()` with runAsync after the calls queued before it on this lane and on `others`
   * (state the program also uses, such as an optimizer); all of them count it as pending.
   */
  enqueue<T>(program: () => Program<T>, ...others: Lane[]): Promise<T> {
    return this.enqueueTask(() => runAsync(program()), ...others);
  }

  /** enqueue() for any asynchronous task over the lane's state (a CUDA graph's replay, lib/training/train.ts). */
  enqueueTask<T>(task: () => Promise<T>, ...others: Lane[]): Promise<T> {
    const lanes = [this, ...others.filter((l) => l !== this)];
    for (const l of lanes) l.pending++;
    const result = Promise.all(lanes.map((l) => l.tail)).then(task).finally(() => {
      for (const l of lanes) l.pending--;
    });
    for (const l of lanes) l.tail = result.catch(() => undefined);
    return result;
  }

  /** Throws ERR_NF_STATE when asynchronous calls are queued or running (before a synchronous `what`). */
  checkIdle(what: string): void {
    if (this.pending > 0)
      throw new NodeformerError('ERR_NF_STATE', `${what} called while ${this.pending} asynchronous call(s) on it are pending; await them first`);
  }
}
