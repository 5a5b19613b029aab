/** Classification accuracy of fit(): argmax of the logits' last axis against int32 labels. */
import type { Tensor } from '../core/tensor';

/** Correct predictions and counted targets (labels < 0, e.g. padding, are not counted). */
export interface Hits {
  correct: number;
  total: number;
}

/**
 * The hits of `output` [..., C] against int32 `targets` [...] (the output's shape without C), or
 * null when the two are not shaped like a classification (a regression, an MSE target).
 */
export function countHits(output: Tensor, targets: Tensor): Hits | null {
  const C = output.shape[output.shape.length - 1];
  if (output.dtype !== 'float32' || targets.dtype !== 'int32' || !C || output.size !== targets.size * C) return null;
  const logits = output.toArray() as Float32Array, labels = targets.toArray() as Int32Array;
  let correct = 0, total = 0;
  for (let r = 0; r < labels.length; r++) {
    if (labels[r] < 0) continue;
    let best = 0;
    for (let c = 1; c < C; c++) if (logits[r * C + c] > logits[r * C + best]) best = c;
    total++;
    if (best === labels[r]) correct++;
  }
  return { correct, total };
}

/** Sums of hits over batches; accuracy() is undefined until a classification batch was counted. */
export class HitTally {
  private sum: Hits | null = null;

  add(h: Hits | null): void {
    if (h) this.sum = { correct: (this.sum?.correct ?? 0) + h.correct, total: (this.sum?.total ?? 0) + h.total };
  }

  /** The sums, or null when nothing was counted. */
  hits(): Hits | null {
    return this.sum;
  }

  accuracy(): number | undefined {
    return this.sum && this.sum.total > 0 ? this.sum.correct / this.sum.total : undefined;
  }
}
