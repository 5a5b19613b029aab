/** Records the native ops a piece of code calls, by wrapping the CPU addon's op functions. */
import { native } from '../../lib/native';
import { OP_NAMES } from '../../lib/native/ops.generated';

/** Wraps every op function (and its Async twin) of the CPU addon to push the op's name; returns the undo. */
function record(called: string[]): () => void {
  const addon = native as unknown as Record<string, (a: object) => unknown>;
  const saved = new Map<string, (a: object) => unknown>();
  for (const name of OP_NAMES)
    for (const fnName of [name, `${name}Async`]) {
      const f = addon[fnName];
      saved.set(fnName, f);
      addon[fnName] = (a: object) => {
        called.push(name);
        return f(a);
      };
    }
  return () => {
    for (const [n, f] of saved) addon[n] = f;
  };
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
