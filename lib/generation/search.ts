/**
 * Greedy decoding and sampling: one token per sequence per step, from bos until every sequence has
 * produced eos or maxLen tokens exist; a finished sequence is padded. Each step's tokens can be
 * handed to a stream (lib/generation/stream.ts) as they are chosen.
 */
import type { Program } from '../core/program';
import { Random } from '../core/random';
import type { GenerationConfig } from './options';
import { greedyTokens, sampleTokens } from './sampling';
import type { StepSource } from './source';

/** Greedy decoding (doSample false) or sampling over `source`; `emit` receives each step's tokens [rows]. Returns int32 [rows, length]. */
export function* greedyOrSample(source: StepSource, cfg: GenerationConfig,
  emit?: (tokens: Int32Array) => Program<void>): Program<{ tokens: Int32Array; length: number }> {
  const rows = source.rows, L = cfg.maxLen;
  const seqs = new Int32Array(rows * L).fill(cfg.pad), done = new Uint8Array(rows);
  const rng = cfg.doSample ? new Random(cfg.seed) : null;
  let length = 1;
  for (let r = 0; r < rows; r++) seqs[r * L] = cfg.bos;
  for (let t = 0; t + 1 < L && done.some((d) => !d); t++) {
    const logits = yield* source.step(seqs, L, t);
    let next: Int32Array;
    try {
      next = rng ? yield* sampleTokens(logits, cfg, rng) : yield* greedyTokens(logits);
    } finally {
      logits.dispose();
    }
    for (let r = 0; r < rows; r++) {
      if (done[r]) next[r] = cfg.pad;
      else if (next[r] === cfg.eos) done[r] = 1;
      seqs[r * L + t + 1] = next[r];
    }
    length = t + 2;
    if (emit) yield* emit(next);
  }
  const tokens = new Int32Array(rows * length);
  for (let r = 0; r < rows; r++) tokens.set(seqs.subarray(r * L, r * L + length), r * length);
  return { tokens, length };
}
