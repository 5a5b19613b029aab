import { stepValue, type StepValueFields } from '../core/graph';
import { op, type Program } from '../core/program';
import type { Random } from '../core/random';
import { emptyLike, type Tensor } from '../core/tensor';

/**
 * One dropout site without parameters (a residual branch, the embeddings): in training mode with
 * p > 0 each forward draws a fresh seed from `rng` and keeps it, so backward regenerates exactly
 * the same mask (Philox, native/core/philox.h). The owning module registers `rng` (addRng) so
 * checkpoints restore the stream. Under CUDA graph capture the seed is a step value (lib/core/graph.ts),
 * drawn again from `rng` at every replay.
 */
export class DropoutSite {
  private seed = 0;
  private seedFields: StepValueFields = {};
  private active = false;

  constructor(readonly p: number, private readonly rng: Random) {}

  /** Whether a forward in this mode drops anything (training with p > 0); else it leaves x as it is. */
  activeIn(training: boolean): boolean {
    return training && this.p > 0;
  }

  /** In place on a tensor the caller owns: x = dropout(x) with a fresh mask (a no-op outside training or with p = 0). */
  *forwardInPlace(x: Tensor<'float32'>, training: boolean): Program<void> {
    this.active = this.activeIn(training);
    if (!this.active) return;
    ({ value: this.seed, fields: this.seedFields } = stepValue('seedAt', () => this.rng.seed(), 0));
    yield* op('dropoutForward', { n: x.size, p: this.p, seed: this.seed, offset: 0, ...this.seedFields, out: x.storage, x: x.storage });
  }

  /** The gradient through the last forward's mask: a new tensor, or `d` itself when no dropout ran. */
  *backward(d: Tensor<'float32'>): Program<Tensor<'float32'>> {
    if (!this.active) return d;
    const dx = emptyLike(d);
    yield* op('dropoutBackward', { n: d.size, p: this.p, seed: this.seed, offset: 0, ...this.seedFields, dx: dx.storage, dout: d.storage });
    return dx;
  }
}

/**
 * y += x over whole tensors (merging gradients of a residual stream); returns y. Under precision
 * 'bf16' both are bfloat16 (x is converted to y's dtype first when they differ).
 */
export function* accumulate(y: Tensor<'float32'>, x: Tensor<'float32'>): Program<Tensor<'float32'>> {
  const xs = x.cast(y.dtype as 'float32');
  yield* op('accumulate', { n: y.size, y: y.storage, x: xs.storage });
  if (xs !== x) xs.dispose();
  return y;
}
