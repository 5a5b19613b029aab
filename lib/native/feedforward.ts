import type { FloatArray } from './layernorm';

/** The feed-forward network's activation: GELU (erf form), GELU (tanh approximation) or ReLU. */
export type FeedForwardActivation = 'gelu' | 'gelu_tanh' | 'relu';

/**
 * Dims of a feed-forward call: `rows` (B*T) rows of width D, hidden width F. Dropout (probability
 * `dropout`, default 0) on the hidden activation keeps element `row*F + f` by the Philox stream
 * (`seed`, `offset`), scaling kept values by 1/(1 − dropout); backward must get the same values.
 */
export interface FeedForwardDims {
  rows: number; D: number; F: number;
  /** Default 'gelu'. */
  activation?: FeedForwardActivation;
  dropout?: number; seed?: number; offset?: number;
}

/** The Transformer MLP y = fc2(dropout(act(fc1(x)))) (see native/cpu/feedforward.h). */
export interface FeedForwardOps {
  /**
   * y [rows, D] = dropout(act(x W1ᵀ + b1)) W2ᵀ + b2, with x [rows, D], W1 [F, D], b1 [F],
   * W2 [D, F], b2 [D]. Saves h [rows, F] = x W1ᵀ + b1 (optional: omit when no backward follows)
   * and a [rows, F] = dropout(act(h)), the fc2 input.
   */
  feedforwardForward(a: FeedForwardDims & {
    y: FloatArray; h?: FloatArray | null; a: FloatArray;
    x: FloatArray; W1: FloatArray; b1: FloatArray; W2: FloatArray; b2: FloatArray;
  }): void;
  /**
   * dx [rows, D] = dh W1 (overwritten) with dh = (dy W2 ∘ dropout mask) ∘ act'(h);
   * dW1 += dhᵀ x; db1 += Σ dh; dW2 += dyᵀ a; db2 += Σ dy. Same dims, seed and offset as forward.
   */
  feedforwardBackward(a: FeedForwardDims & {
    dx: FloatArray; dW1: FloatArray; db1: FloatArray; dW2: FloatArray; db2: FloatArray; dy: FloatArray;
    x: FloatArray; h: FloatArray; a: FloatArray; W1: FloatArray; W2: FloatArray;
  }): void;
}
