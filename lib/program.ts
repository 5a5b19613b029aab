/**
 * Programs: module code written once, run synchronously or off the main thread. A program is a
 * generator that yields native op requests ({op, args}) and returns its result; modules delegate
 * to their children with `yield*`. runSync calls `native[op](args)` for each request; runAsync
 * awaits `native[op + 'Async'](args)`, which runs the op on a libuv worker thread (plain arrays
 * and numbers in, no JS touched off the main thread), so only the light JS between ops runs on
 * the event loop. An op that fails is thrown into the program, so its try/finally blocks run.
 */
import { NodeformerError } from './errors';
import { native, type NativeBinding } from './native';

/** Names of the ops that have an `...Async` twin. */
export type OpName = {
  [K in keyof NativeBinding & string]: `${K}Async` extends keyof NativeBinding ? K : never;
}[keyof NativeBinding & string];

/** The options object of op `K`. */
export type OpArgs<K extends OpName> = Parameters<NativeBinding[K]>[0];

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

/** Runs a program on the calling thread. */
export function runSync<T>(program: Program<T>): T {
  let step = program.next();
  while (!step.done) {
    let error: { value: unknown } | null = null;
    try {
      (native[step.value.op] as RawOp)(step.value.args);
    } catch (e) {
      error = { value: e };
    }
    step = error ? program.throw(error.value) : program.next();
  }
  return step.value;
}

/** Runs a program with every op on a worker thread; resolves with its result. */
export async function runAsync<T>(program: Program<T>): Promise<T> {
  let step = program.next();
  while (!step.done) {
    let error: { value: unknown } | null = null;
    try {
      await (native[`${step.value.op}Async`] as RawOp)(step.value.args);
    } catch (e) {
      error = { value: e };
    }
    step = error ? program.throw(error.value) : program.next();
  }
  return step.value;
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
    const lanes = [this, ...others.filter((l) => l !== this)];
    for (const l of lanes) l.pending++;
    const result = Promise.all(lanes.map((l) => l.tail)).then(() => runAsync(program())).finally(() => {
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
