import type { FloatArray } from './layernorm';

/** Training losses with their gradients fused in (see native/cpu/loss.h). */
export interface LossOps {
  /**
   * Softmax cross-entropy with PyTorch's F.cross_entropy semantics (mean reduction):
   * loss[0] = mean over rows whose target is not `ignoreIndex` (default −100) of
   * (1−ε)(−log p[target]) + ε·mean_c(−log p[c]), p = softmax(logits row), ε = `labelSmoothing`
   * (default 0); NaN when every row is ignored, as PyTorch. `dlogits` (optional, overwritten)
   * = `gradScale` (default 1) · d loss / d logits, zero on ignored rows. logits/dlogits [N, V],
   * targets [N], loss [1]. A target outside [0, V) that is not ignoreIndex throws, naming the row.
   */
  crossEntropy(a: {
    N: number; V: number; labelSmoothing?: number; ignoreIndex?: number; gradScale?: number;
    loss: FloatArray; dlogits?: FloatArray | null; logits: FloatArray; targets: Int32Array;
  }): void;
  /**
   * Mean squared error over the rows selected by `mask` (Uint8Array [rows], nonzero = the row
   * counts; every row when absent): loss[0] = Σ (pred − target)² / (selected rows · cols), NaN
   * when no row is selected. `dpred` (optional, overwritten) = gradScale · 2 (pred − target) /
   * (selected rows · cols) on selected rows, 0 elsewhere. pred/target/dpred [rows, cols], loss [1].
   */
  mse(a: {
    rows: number; cols: number; gradScale?: number;
    loss: FloatArray; dpred?: FloatArray | null; pred: FloatArray; target: FloatArray; mask?: Uint8Array | null;
  }): void;
}
