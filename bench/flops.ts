/**
 * Analytic FLOP counts (1 multiply-add = 2 FLOPs) of the benchmark's work, the numerator of every
 * GFLOP/s figure. Counted: every matrix product — projections, attention scores QKᵀ and the
 * weighted sum A·V, feed-forward, patch embedding, classifier/vocabulary head. Not counted:
 * LayerNorm, softmax, activations, residual adds, embeddings lookups, the loss and the optimizer
 * (O(tokens·D) or O(params) work, a few percent at these sizes). Attention is counted dense: a
 * causal mask's skipped half is still counted, as the convention for reporting goes.
 *
 * Per sequence of T tokens, width D, feed-forward width F:
 *   self-attention block  8·T·D² (Q, K, V and output projections) + 4·T²·D (QKᵀ and A·V)
 *   cross-attention       4·T·D² (Q and output) + 4·S·D² (K and V of S memory tokens) + 4·T·S·D
 *   feed-forward          4·T·D·F
 * Forward ≈ 2·params·tokens + the attention terms. Training (forward, backward, optimizer) is
 * counted as 3× the forward: backward computes two products (input and weight gradients) for
 * each forward product.
 */
import type { ModelSpec } from './specs';

const selfAttention = (T: number, D: number) => 8 * T * D * D + 4 * T * T * D;
const crossAttention = (T: number, S: number, D: number) => 4 * T * D * D + 4 * S * D * D + 4 * T * S * D;
const feedForward = (T: number, D: number, F: number) => 4 * T * D * F;

/** FLOPs of one forward pass over the whole batch. */
export function forwardFlops(spec: ModelSpec): number {
  const a = spec.arch;
  if (a.kind === 'vit') {
    const N = (a.imgSize / a.patchSize) ** 2, T = N + 1, D = a.dModel;
    const patchEmbed = 2 * N * a.inChannels * a.patchSize ** 2 * D;
    const blocks = a.depth * (selfAttention(T, D) + feedForward(T, D, a.dFF));
    const head = 2 * D * a.numClasses;  // the CLS token only
    return spec.batch * (patchEmbed + blocks + head);
  }
  const S = a.srcLen, T = a.tgtLen, D = a.dModel;
  const encoder = a.depth * (selfAttention(S, D) + feedForward(S, D, a.dFF));
  const decoder = a.depth * (selfAttention(T, D) + crossAttention(T, S, D) + feedForward(T, D, a.dFF));
  const head = 2 * T * D * a.vocab;
  return spec.batch * (encoder + decoder + head);
}

/** FLOPs of one training step (forward, backward): 3× the forward. */
export function trainFlops(spec: ModelSpec): number {
  return 3 * forwardFlops(spec);
}

/** FLOPs of C[M,N] = A[M,K]·B[K,N]. */
export function gemmFlops(M: number, N: number, K: number): number {
  return 2 * M * N * K;
}

/** FLOPs of the attention layer's forward (projections included) over B sequences: self-attention (Tk = Tq) or cross-attention. */
export function attentionLayerFlops(B: number, Tq: number, Tk: number, D: number, cross: boolean): number {
  return B * (cross ? crossAttention(Tq, Tk, D) : selfAttention(Tq, D));
}
