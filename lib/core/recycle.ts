/**
 * Recycled host memory (issue 12: garbage-collector work per step). Every cpu tensor is an
 * ArrayBuffer, which V8 counts as external memory; a training step's activations live for a whole
 * step, so allocating a new buffer for each of them made V8 run young-generation GCs for "external
 * memory pressure" several times per step, and, through what those GCs promote, mark-compact GCs.
 *
 * So each program run (runSync, runAsync: lib/core/program.ts) has a pool of host buffers: an
 * intermediate the run frees with Tensor.recycle (a Scope does so when it closes) hands its buffer
 * to the pool instead of detaching it, and the run's next cpu tensor of that byte size takes it back
 * instead of a new ArrayBuffer. A step thus reuses the buffers of the previous step's
 * activations, which its modules free as they run their forward again. What is left in the pool
 * when the run ends is freed (detached), as dispose() would have.
 *
 * Why it is safe: only intermediates that no caller has seen are recycled (a view of their data
 * kept from before would read the next tensor's values); a pool serves its own run only; and in
 * runAsync every op is awaited before the program goes on, so no op of the run is in flight when one
 * of its tensors is recycled.
 * Peak memory, when shapes change between steps: a smaller tensor takes a pooled buffer of up to
 * twice its size, and an allocation the pool cannot serve first frees smaller pooled buffers, oldest
 * first, of at least its size (malloc then reuses that memory), so pooled buffers that no longer fit
 * do not pile up beside the new ones.
 */
import { native } from '../native/addon';

/** The host buffers freed in one program run, waiting for a tensor of their size. */
export class HostPool {
  /** Oldest first. */
  private readonly free: ArrayBuffer[] = [];

  /**
   * A pooled buffer for a tensor of `bytes`: one of exactly that size (the most recently freed), else,
   * with `larger`, the smallest of at most twice the size (a tensor views the start of its buffer).
   * Null when there is none, after freeing smaller pooled buffers (oldest first) of at least `bytes`
   * in all: they would not fit this tensor and, when shapes grow, not the next ones either.
   */
  take(bytes: number, larger: boolean): ArrayBuffer | null {
    let fit = -1;
    for (let i = this.free.length - 1; i >= 0; i--) {
      const n = this.free[i].byteLength;
      if (n === bytes) return this.free.splice(i, 1)[0];
      if (larger && n > bytes && n <= 2 * bytes && (fit < 0 || n < this.free[fit].byteLength)) fit = i;
    }
    if (fit >= 0) return this.free.splice(fit, 1)[0];
    for (let i = 0, released = 0; i < this.free.length && released < bytes;) {
      if (this.free[i].byteLength > bytes) i++;
      else {
        released += this.free[i].byteLength;
        native.release(this.free.splice(i, 1)[0]);
      }
    }
    return null;
  }

  /** Keeps `buffer` (no longer viewed by any tensor) for the run's next tensor of its size. */
  give(buffer: ArrayBuffer): void {
    this.free.push(buffer);
  }

  /** Frees every pooled buffer (the run has ended). */
  drain(): void {
    for (const b of this.free) native.release(b);
    this.free.length = 0;
  }
}

/** The pool of the program run whose JS is executing now, if any. */
let current: HostPool | null = null;
/** Whether runs recycle (setRecycling). */
let enabled = true;

/** The pool of the program run executing now (null outside runs, or with recycling off). */
export function currentPool(): HostPool | null {
  return enabled ? current : null;
}

/** @internal For tests: turns recycling off (every tensor a new buffer, every free a detach) or back on. */
export function setRecycling(on: boolean): void {
  enabled = on;
}

/**
 * Calls `f` with `pool` as the current pool: program runners wrap each resumption of a program;
 * null, for a long-lived tensor made inside a run (a Linear's prepacked weight, lib/core/prepack.ts),
 * which should get a buffer of its own size, not a pooled one of up to twice it.
 */
export function inPool<T>(pool: HostPool | null, f: () => T): T {
  const outer = current;
  current = pool;
  try {
    return f();
  } finally {
    current = outer;
  }
}

