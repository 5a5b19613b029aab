/**
 * Beam search with Hugging Face's BeamSearchScorer semantics, per batch row:
 * - every step each of the numBeams beams of a row proposes every token, scored by its running sum
 *   of log-probabilities (log_softmax of the logits); the 2·numBeams best of the row's candidates
 *   (the native topk op over [B, numBeams·V]) are walked in order: an eos candidate ranked among the
 *   first numBeams becomes a finished hypothesis, any other candidate a running beam, until
 *   numBeams beams run (the caches follow their beams: StepSource.reorder);
 * - a hypothesis scores sum(log p) / length ** lengthPenalty, length = its generated tokens (eos
 *   included, bos not: HF's generated_len); each row keeps its numBeams best;
 * - a row is done when numBeams hypotheses are finished and, unless earlyStopping is true, none of
 *   its running beams can beat the worst of them: earlyStopping false uses HF's estimate (the best
 *   running sum divided by the current length ** lengthPenalty), 'never' the exact bound (divided
 *   by the longest possible length when lengthPenalty > 0);
 * - at maxLen the running beams of the rows not done are scored as hypotheses too, and each row
 *   returns its best (bos, the tokens, eos when it ended with one, then padding).
 * At the first step only beam 0 of a row proposes (the others start at −1e9), as HF.
 */
import { logSoftmaxOps, topkOps } from './logits';
import type { Program } from '../core/program';
import { Scope } from '../core/scope';
import { Tensor } from '../core/tensor';
import type { GenerationConfig } from './options';
import type { StepSource } from './source';

/** A finished sequence: its generated tokens (eos included when it ended with one) and its score. */
interface Hypothesis {
  tokens: Int32Array;
  score: number;
}

/** The numBeams best finished hypotheses of one batch row (HF's BeamHypotheses). */
class Hypotheses {
  readonly list: Hypothesis[] = [];
  private worst = 1e9;

  constructor(private readonly numBeams: number, private readonly lengthPenalty: number) {}

  /** Adds a hypothesis of `sumLogProbs` over its tokens, if it is among the best numBeams. */
  add(tokens: Int32Array, sumLogProbs: number): void {
    const score = sumLogProbs / tokens.length ** this.lengthPenalty;
    if (this.list.length < this.numBeams || score > this.worst) {
      this.list.push({ tokens, score });
      if (this.list.length > this.numBeams) {
        const order = this.list.map((h, i) => [h.score, i] as const).sort((a, b) => a[0] - b[0] || a[1] - b[1]);
        this.list.splice(order[0][1], 1);
        this.worst = order[1][0];
      } else {
        this.worst = Math.min(score, this.worst);
      }
    }
  }

  /** Whether the row is done, given the best running sum of log-probabilities at `generated` tokens out of `maxGenerated`. */
  done(bestSum: number, generated: number, maxGenerated: number, earlyStopping: boolean | 'never'): boolean {
    if (this.list.length < this.numBeams) return false;
    if (earlyStopping === true) return true;
    const length = earlyStopping === 'never' && this.lengthPenalty > 0 ? maxGenerated : generated;
    return this.worst >= bestSum / length ** this.lengthPenalty;
  }

  /** The best hypothesis (the last added among equal scores, as HF). */
  best(): Hypothesis {
    return this.list.reduce((a, b) => (b.score >= a.score ? b : a));
  }
}

/** Beam search over `source` (rows = B · numBeams); returns the best sequence of each batch row, int32 [B, length]. */
export function* beamSearch(source: StepSource, cfg: GenerationConfig): Program<{ tokens: Int32Array; length: number }> {
  const nb = cfg.numBeams, rows = source.rows, B = rows / nb, V = source.vocab, L = cfg.maxLen;
  const seqs = new Int32Array(rows * L).fill(cfg.pad), next = new Int32Array(rows * L);
  for (let r = 0; r < rows; r++) seqs[r * L] = cfg.bos;
  let sums = Float64Array.from({ length: rows }, (_, r) => (r % nb === 0 ? 0 : -1e9));
  const hyps = Array.from({ length: B }, () => new Hypotheses(nb, cfg.lengthPenalty));
  const done = new Uint8Array(B);
  const k = Math.min(2 * nb, nb * V);
  for (let t = 0; t + 1 < L && done.some((d) => !d); t++) {
    const tmp = new Scope();
    try {
      const logp = tmp.add(yield* logSoftmaxOps(tmp.add(yield* source.step(seqs, L, t)))).hostValues();
      const scores = tmp.add(Tensor.from(Float32Array.from(logp, (x, i) => x + sums[Math.floor(i / V)]), [B, nb * V]));
      const top = yield* topkOps(scores, k);
      const value = tmp.add(top.values).data, index = tmp.add(top.indices).data;
      const from = new Int32Array(rows), nextSums = new Float64Array(rows), generated = t + 1;
      for (let b = 0; b < B; b++) {
        let beam = 0;
        if (!done[b])
          for (let rank = 0; rank < k && beam < nb; rank++) {
            const j = index[b * k + rank], src = b * nb + Math.floor(j / V), token = j % V;
            if (token === cfg.eos) {
              if (rank >= nb) continue;
              const tokens = seqs.slice(src * L + 1, src * L + 1 + generated);
              tokens[generated - 1] = token;
              hyps[b].add(tokens, value[b * k + rank]);
            } else {
              from[b * nb + beam] = src;
              nextSums[b * nb + beam] = value[b * k + rank];
              seqs[src * L + t + 1] = token; // written before the copy below; `src` keeps its own prefix
              next.set(seqs.subarray(src * L, src * L + t + 2), (b * nb + beam) * L);
              seqs[src * L + t + 1] = cfg.pad;
              beam++;
            }
          }
        for (; beam < nb; beam++) { // a done row (or too few candidates): padding beams that never win
          from[b * nb + beam] = b * nb;
          nextSums[b * nb + beam] = done[b] ? 0 : -1e9;
          next.set(seqs.subarray(b * nb * L, b * nb * L + t + 1), (b * nb + beam) * L);
          next[(b * nb + beam) * L + t + 1] = cfg.pad;
        }
        if (!done[b] && hyps[b].done(value[b * k], generated, L - 1, cfg.earlyStopping)) done[b] = 1;
      }
      for (let r = 0; r < rows; r++) seqs.set(next.subarray(r * L, r * L + t + 2), r * L);
      sums = nextSums;
      if (done.some((d) => !d) && t + 2 < L) yield* source.reorder(from, t);
    } finally {
      tmp.close();
    }
  }
  return bestSequences(seqs, sums, hyps, done, cfg);
}

/** Scores the running beams of the rows not done as hypotheses; returns each row's best: [B, length], bos first, padded. */
function bestSequences(seqs: Int32Array, sums: Float64Array, hyps: Hypotheses[], done: Uint8Array, cfg: GenerationConfig) {
  const nb = cfg.numBeams, L = cfg.maxLen;
  for (let b = 0; b < hyps.length; b++)
    if (!done[b])
      for (let r = b * nb; r < (b + 1) * nb; r++) {
        const tokens = seqs.slice(r * L + 1, (r + 1) * L);
        if (tokens.length) hyps[b].add(tokens, sums[r]);
      }
  const best = hyps.map((h) => (h.list.length ? h.best().tokens : new Int32Array(0)));
  const length = 1 + Math.max(...best.map((t) => t.length));
  const tokens = new Int32Array(hyps.length * length).fill(cfg.pad);
  best.forEach((t, b) => {
    tokens[b * length] = cfg.bos;
    tokens.set(t, b * length + 1);
  });
  return { tokens, length };
}
