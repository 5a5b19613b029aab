/**
 * Choosing the next token from logits [rows, V]: greedy (the argmax op), or sampling after Hugging
 * Face's logits warpers, in HF's order: temperature (logits / T), top-k (tokens below the k-th
 * largest logit removed, ties with it kept), top-p (sorted ascending, the tokens whose cumulative
 * probability is <= 1 − topP removed, the most likely always kept); then one draw per row from the
 * softmax of what is left, by inverse CDF over the token ids in order with a seeded generator.
 * The sorting and normalising run as native ops (topk, softmax) on host tensors.
 */
import { argmaxOps, softmaxOps, topkOps } from './logits';
import type { Program } from '../core/program';
import type { Random } from '../core/random';
import { Scope } from '../core/scope';
import { Tensor } from '../core/tensor';
import type { GenerationConfig } from './options';

/** The most likely token of each row (the first on ties). */
export function* greedyTokens(logits: Tensor<'float32'>): Program<Int32Array> {
  const ids = yield* argmaxOps(logits);
  try {
    return Int32Array.from(ids.hostValues());
  } finally {
    ids.dispose();
  }
}

/**
 * The warped scores of HF's sampling: logits [rows, V] (host) → a host tensor [rows, V] with the
 * removed tokens at −inf. `cfg.topK` is in [1, V] (V: no filtering).
 */
export function* warpLogits(logits: Float32Array, rows: number, V: number,
  cfg: Pick<GenerationConfig, 'temperature' | 'topK' | 'topP'>): Program<Tensor<'float32'>> {
  const scores = Tensor.from(Float32Array.from(logits, (x) => x / cfg.temperature), [rows, V]);
  const s = scores.data, tmp = new Scope();
  try {
    if (cfg.topK < V) {
      const top = yield* topkOps(scores, cfg.topK);
      const kth = tmp.add(top.values).data;
      tmp.add(top.indices);
      for (let r = 0; r < rows; r++)
        for (let v = 0; v < V; v++) if (s[r * V + v] < kth[r * cfg.topK + cfg.topK - 1]) s[r * V + v] = -Infinity;
    }
    if (cfg.topP < 1) {
      const sorted = yield* topkOps(scores, V); // descending
      const idx = tmp.add(sorted.indices).data;
      const p = tmp.add(yield* softmaxOps(tmp.add(sorted.values))).data;
      for (let r = 0; r < rows; r++) {
        let tail = 0; // the ascending cumulative probability, from the least likely token up
        for (let j = V - 1; j >= 1; j--) {
          tail += p[r * V + j];
          if (tail <= 1 - cfg.topP) s[r * V + idx[r * V + j]] = -Infinity;
        }
      }
    }
    return scores;
  } catch (e) {
    scores.dispose();
    throw e;
  } finally {
    tmp.close();
  }
}

/** One sampled token per row of logits [rows, V] (on any device), after warpLogits. */
export function* sampleTokens(logits: Tensor<'float32'>, cfg: GenerationConfig, rng: Random): Program<Int32Array> {
  const V = logits.shape[logits.shape.length - 1], rows = logits.size / V;
  const tmp = new Scope();
  try {
    const scores = tmp.add(yield* warpLogits(logits.hostValues(), rows, V, cfg));
    const p = tmp.add(yield* softmaxOps(scores)).data;
    const out = new Int32Array(rows);
    for (let r = 0; r < rows; r++) out[r] = draw(p.subarray(r * V, (r + 1) * V), rng.uniform());
    return out;
  } finally {
    tmp.close();
  }
}

/** The token whose cumulative probability first passes u (the last token of nonzero probability if rounding leaves u above the total). */
export function draw(p: Float32Array, u: number): number {
  let c = 0, last = 0;
  for (let v = 0; v < p.length; v++) {
    if (!(p[v] > 0)) continue;
    c += p[v];
    last = v;
    if (u < c) return v;
  }
  return last;
}
