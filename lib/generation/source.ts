/**
 * What a decoding strategy needs of a model: the logits of the next token of `rows` sequences
 * decoded side by side (a batch, or a batch of beams), and, for beam search, a way to let one
 * sequence continue another's prefix (its key/value caches copied over).
 */
import type { Program } from '../core/program';
import type { Tensor } from '../core/tensor';

export interface StepSource {
  /** Sequences decoded side by side (batch × beams). */
  readonly rows: number;
  /** Target vocabulary size. */
  readonly vocab: number;
  /**
   * Logits [rows, V] (or [rows, 1, V]) of the token after position t: `seqs` holds the tokens
   * (host, row r at r · stride), of which positions 0..t are the prefixes. The caller frees them.
   */
  step(seqs: Int32Array, stride: number, t: number): Program<Tensor<'float32'>>;
  /** Row r continues the prefix (positions 0..t) of row from[r] (its caches are copied over). */
  reorder(from: Int32Array, t: number): Program<void>;
}
