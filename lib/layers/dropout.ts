import { native } from '../native';
import { Random } from '../random';
import { Tensor } from '../tensor';

/**
 * One dropout site without parameters (a residual branch, the embeddings): in training mode with
 * p > 0 each forward draws a fresh seed and keeps it, so backward regenerates exactly the same
 * mask (Philox, native/core/philox.h).
 */
export class DropoutSite {
  private readonly rng: Random;
  private seed = 0;
  private active = false;

  constructor(readonly p: number, seed: number) {
    this.rng = new Random(seed);
  }

  /** In place on a tensor the caller owns: x = dropout(x) with a fresh mask (a no-op outside training or with p = 0). */
  forwardInPlace(x: Tensor<'float32'>, training: boolean): void {
    this.active = training && this.p > 0;
    if (!this.active) return;
    this.seed = this.rng.seed();
    native.dropoutForward({ n: x.size, p: this.p, seed: this.seed, offset: 0, out: x.data, x: x.data });
  }

  /** The gradient through the last forward's mask: a new tensor, or `d` itself when no dropout ran. */
  backward(d: Tensor<'float32'>): Tensor<'float32'> {
    if (!this.active) return d;
    const dx = Tensor.zeros(d.shape);
    native.dropoutBackward({ n: d.size, p: this.p, seed: this.seed, offset: 0, dx: dx.data, dout: d.data });
    return dx;
  }
}

/** y += x over whole tensors (merging gradients of a residual stream). */
export function accumulate(y: Tensor<'float32'>, x: Tensor<'float32'>): Tensor<'float32'> {
  native.accumulate({ n: y.size, y: y.data, x: x.data });
  return y;
}
