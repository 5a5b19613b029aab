import { uncapturable } from '../core/graph';
import { op, type Program } from '../core/program';
import type { Random } from '../core/random';
import type { Scope } from '../core/scope';
import { Tensor } from '../core/tensor';

/**
 * Stochastic depth on a residual branch (timm's DropPath): in training with p > 0, each sample's
 * branch output is dropped whole with probability p and kept ones are scaled by 1/(1 − p). Each
 * forward draws the samples' keep decisions from `rng` and keeps them (in the owning module's
 * activations) for backward. The scaling runs as a batched GEMM with one 1 × 1 factor per sample.
 */
export class DropPathSite {
  private scales: Tensor<'float32'> | null = null;

  constructor(readonly p: number, private readonly rng: Random) {}

  /** Whether a forward in this mode drops anything (training with p > 0); else it returns x itself. */
  activeIn(training: boolean): boolean {
    return training && this.p > 0;
  }

  /** x [B, ...] → a new tensor of the branch as kept or dropped per sample; `x` itself when inactive. The factors go to `scope`. */
  *forward(x: Tensor<'float32'>, training: boolean, scope: Scope): Program<Tensor<'float32'>> {
    this.scales = null;
    if (!this.activeIn(training)) return x;
    uncapturable("drop path (each step's per-sample factors are uploaded from the host)");
    const B = x.shape[0], keep = 1 / (1 - this.p);
    this.scales = scope.add(Tensor.from(Float32Array.from({ length: B }, () => (this.rng.uniform() >= this.p ? keep : 0)), [B], x.device));
    return yield* this.scale(x);
  }

  /** The gradient through the last forward's per-sample factors: a new tensor, or `d` itself when inactive. */
  *backward(d: Tensor<'float32'>): Program<Tensor<'float32'>> {
    return this.scales ? yield* this.scale(d) : d;
  }

  /**
   * out[b] = scales[b] · x[b]: B products [1, 1] × [1, n] (n values per sample), in float32 (the gemm
   * op has no bf16 kernel: bfloat16 activations are converted around it, and the result back).
   */
  private *scale(x: Tensor<'float32'>): Program<Tensor<'float32'>> {
    const B = x.shape[0], n = x.size / B, x32 = x.cast('float32'), out = Tensor.empty(x.shape, 'float32', x.device);
    yield* op('gemm', { M: 1, N: n, K: 1, batch: B, lda: 1, strideA: 1, ldb: n, strideB: n, ldc: n, strideC: n,
      A: this.scales!.storage, B: x32.storage, C: out.storage });
    if (x32 === x) return out;
    x32.dispose();
    const back = out.cast(x.dtype as 'float32');
    out.dispose();
    return back;
  }
}
