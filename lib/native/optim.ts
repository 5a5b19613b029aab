import type { FloatArray } from './layernorm';

/** Optimizer steps and gradient-norm reductions on flat buffers of n elements (see native/cpu/optim.h). */
export interface OptimOps {
  /**
   * One torch.optim.AdamW step in place on param, expAvg and expAvgSq (zeros before step 1), in
   * torch's order of operations. `step` is the 1-based step number t. Defaults as torch: lr 1e-3,
   * beta1 0.9, beta2 0.999, eps 1e-8, weightDecay 1e-2.
   */
  adamwStep(a: {
    n: number; step: number; lr?: number; beta1?: number; beta2?: number; eps?: number; weightDecay?: number;
    param: FloatArray; grad: FloatArray; expAvg: FloatArray; expAvgSq: FloatArray;
  }): void;
  /**
   * One torch.optim.SGD step in place: d = grad + weightDecay·param; with momentum, momentumBuf =
   * d at step 1, else momentum·momentumBuf + (1 − dampening)·d; d = d + momentum·momentumBuf
   * (nesterov) or momentumBuf; param −= lr·d. `momentumBuf` is required when momentum ≠ 0.
   * Defaults: lr 1e-3, momentum 0, dampening 0, weightDecay 0, nesterov false.
   */
  sgdStep(a: {
    n: number; step: number; lr?: number; momentum?: number; dampening?: number; weightDecay?: number;
    nesterov?: boolean; param: FloatArray; grad: FloatArray; momentumBuf?: FloatArray | null;
  }): void;
  /** out[0] = Σ x² (accumulated in double); out has length 1. */
  sumSquares(a: { n: number; out: FloatArray; x: FloatArray }): void;
  /** x *= s in place. */
  scale(a: { n: number; x: FloatArray; s: number }): void;
  /**
   * torch.nn.utils.clip_grad_norm_ on one buffer: total = sqrt(Σ grad²); coef = maxNorm /
   * (total + 1e-6); grad *= coef when coef < 1 (or NaN); totalNorm[0] = total.
   */
  clipGradNorm(a: { n: number; grad: FloatArray; maxNorm: number; totalNorm: FloatArray }): void;
}
