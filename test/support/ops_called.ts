/** Records the native ops a piece of code calls, by wrapping the CPU addon's op functions. */
import { native } from '../../lib/native/addon';
import { OP_NAMES } from '../../lib/native/ops.generated';

/**
 * Wraps every op function of the CPU addon (the sync ones, and with `async` their Async twins too)
 * so that each call runs as `around(name, call)`; returns the undo.
 */
export function wrapOps(around: (name: string, call: () => unknown) => unknown, async = true): () => void {
  const addon = native as unknown as Record<string, (a: object) => unknown>;
  const saved = new Map<string, (a: object) => unknown>();
  for (const name of OP_NAMES)
    for (const fnName of async ? [name, `${name}Async`] : [name]) {
      const f = addon[fnName];
      saved.set(fnName, f);
      addon[fnName] = (a: object) => around(name, () => f(a));
    }
  return () => {
    for (const [n, f] of saved) addon[n] = f;
  };
}

/** Wraps every op function (and its Async twin) of the CPU addon to push the op's name; returns the undo. */
function record(called: string[]): () => void {
  return wrapOps((name, call) => {
    called.push(name);
    return call();
  });
}

/** Runs `fn` and returns the names of the native ops it called, in order, once per call (sync or Async twin). */
export function opsCalledList(fn: () => void): string[] {
  const called: string[] = [];
  const undo = record(called);
  try {
    fn();
  } finally {
    undo();
  }
  return called;
}

/** opsCalledList for asynchronous code: the ops called until `fn`'s Promise settles. */
export async function opsCalledListAsync(fn: () => Promise<unknown>): Promise<string[]> {
  const called: string[] = [];
  const undo = record(called);
  try {
    await fn();
  } finally {
    undo();
  }
  return called;
}
