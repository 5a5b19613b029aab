/**
 * Ownership of intermediate tensors. A module's forward keeps the intermediates its backward
 * reads in a Scope and frees them when the next forward starts (or on dispose()); a backward
 * frees its intermediate gradients when it returns. Tensors the caller passed in are "borrowed":
 * a Scope never frees them, even when a call hands one back unchanged.
 */
import type { Tensor } from './tensor';

export class Scope {
  private readonly owned = new Set<Tensor>();
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

  /** Frees every owned tensor except those in `keep`, which stay owned. */
  trim(...keep: (Tensor | null | undefined)[]): void {
    for (const t of this.owned)
      if (!keep.includes(t)) {
        t.dispose();
        this.owned.delete(t);
      }
  }

  /** Frees every owned tensor except those in `keep`. */
  close(...keep: (Tensor | null | undefined)[]): void {
    for (const t of this.owned) if (!keep.includes(t)) t.dispose();
    this.owned.clear();
  }
}
