/**
 * Ownership of intermediate tensors. A module's forward keeps the intermediates its backward
 * reads in a Scope and frees them when the next forward starts (or on dispose()); a backward
 * frees each intermediate gradient once the layer that reads it has run, and the rest when it
 * returns. Tensors the caller passed in are "borrowed": a Scope never frees them, even when a call
 * hands one back unchanged.
 *
 * Freeing inside a program run recycles (Tensor.recycle, lib/core/recycle.ts): the memory goes to the
 * run's next tensor of the same size, so an owned tensor must be one no caller has seen (keep no
 * view of its data); a tensor callers also see, such as a module's public field, is added with
 * addExposed and freed by detaching its memory.
 */
import type { Tensor } from './tensor';

export class Scope {
  private readonly owned = new Set<Tensor>();
  private readonly exposed = new Set<Tensor>();
  private readonly borrowed: ReadonlySet<Tensor | null | undefined>;

  /** `borrowed`: the caller's tensors, never freed by this scope. */
  constructor(...borrowed: (Tensor | null | undefined)[]) {
    this.borrowed = new Set(borrowed);
  }

  /** Takes ownership of `t` (unless it is borrowed or null) and returns it. */
  add<T extends Tensor | null>(t: T): T {
    if (t && !this.borrowed.has(t)) this.owned.add(t);
    return t;
  }

  /** add() for a tensor callers also see (never recycled: its memory is detached when freed). */
  addExposed<T extends Tensor | null>(t: T): T {
    if (t && !this.borrowed.has(t)) this.exposed.add(this.add(t));
    return t;
  }

  /**
   * Frees `old` (if owned, and not `t`) and takes ownership of `t`; returns `t`. For a chain of
   * layers where each result replaces the last: `d = tmp.replace(d, yield* layer.backwardOps(d))`.
   */
  replace<T extends Tensor>(old: Tensor, t: T): T {
    this.add(t);
    if (old !== t) this.free(old);
    return t;
  }

  /** Frees now those of `ts` that this scope owns (intermediates whose last reader has run). */
  free(...ts: (Tensor | null | undefined)[]): void {
    for (const t of ts) if (t && this.owned.delete(t)) this.release(t);
  }

  /** Frees every owned tensor except those in `keep`, which stay owned. */
  trim(...keep: (Tensor | null | undefined)[]): void {
    for (const t of this.owned) if (!keep.includes(t)) this.free(t);
  }

  /** Frees every owned tensor except those in `keep`. */
  close(...keep: (Tensor | null | undefined)[]): void {
    for (const t of this.owned) if (!keep.includes(t)) this.release(t);
    this.owned.clear();
    this.exposed.clear();
  }

  private release(t: Tensor): void {
    if (this.exposed.delete(t)) t.dispose();
    else t.recycle();
  }
}
