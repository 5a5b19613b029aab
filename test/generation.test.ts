/**
 * Transformer.generate with Hugging Face's options: greedy against a greedy loop over forward();
 * sampling reproducible by seed and reducing to greedy (topK 1, temperature → 0); HF's warpers on
 * fixed logits against hand computations; beam search against a brute-force search over every
 * sequence of a tiny vocabulary; generateAsync and generateStream against generate; an early break
 * out of a stream frees what it held; bad options rejected.
 */
import { describe, expect, it } from 'vitest';

import { logSoftmax, NodeformerError, paddingMask, runSync, Tensor, Transformer } from '../lib';
import { draw, warpLogits } from '../lib/generation/sampling';

const V = 5, BOS = 1, EOS = 2;
const model = (seed = 3, maxLen = 8) =>
  new Transformer({ srcVocab: 7, tgtVocab: V, maxLen, dModel: 16, numHeads: 2, dFF: 32, depth: 2, seed });
const src = Tensor.from(Int32Array.from([3, 4, 5, 6, 1, 3, 3, 0]), [2, 4]);
const rows = (t: Tensor<'int32'>) => Array.from({ length: t.shape[0] }, (_, b) => Array.from(t.toArray().slice(b * t.shape[1], (b + 1) * t.shape[1])));

/**
 * Log-probabilities of the next token after `prefix` for source row b, from the encoder and the
 * decoder's forward() on the whole prefix (no target padding mask: generated tokens may equal padIdx).
 */
function nextLogProbs(m: Transformer, b: number, prefix: number[]): Float32Array {
  const s = Tensor.from(src.data.slice(b * 4, b * 4 + 4), [1, 4]), pad = paddingMask(s, 0);
  const memory = m.encoder.forward(s, { keyPaddingMask: pad }) as Tensor<'float32'>;
  const logits = m.decoder.forward(Tensor.from(Int32Array.from(prefix), [1, prefix.length]), memory, { memoryKeyPaddingMask: pad }) as Tensor<'float32'>;
  return logSoftmax(logits).data.slice((prefix.length - 1) * V, prefix.length * V);
}

const argmaxOf = (a: ArrayLike<number>) => Array.from(a).reduce((best, v, i, all) => (v > all[best] ? i : best), 0);

describe('greedy decoding', () => {
  it('equals a greedy loop over forward() (cached and uncached), and numBeams 1 is greedy', async () => {
    const m = model();
    m.eval();
    const want = [0, 1].map((b) => {
      const seq = [BOS];
      while (seq.length < 8 && seq[seq.length - 1] !== EOS) seq.push(argmaxOf(nextLogProbs(m, b, seq)));
      return seq;
    });
    const L = Math.max(...want.map((s) => s.length));
    const padded = want.map((s) => [...s, ...Array(L - s.length).fill(0)]);
    expect(rows(m.generate(src))).toEqual(padded);
    expect(rows(m.generate(src, { useCache: false }))).toEqual(padded);
    expect(rows(m.generate(src, { numBeams: 1, topK: 3 }))).toEqual(padded); // topK without doSample is ignored, as HF
    expect(rows(await m.generateAsync(src))).toEqual(padded);
  });
});

describe('sampling', () => {
  const m = model();
  const greedy = rows(m.generate(src));

  it('is reproducible by seed, and differs between seeds', async () => {
    const a = rows(m.generate(src, { doSample: true, seed: 11, topK: 0 }));
    expect(rows(m.generate(src, { doSample: true, seed: 11, topK: 0 }))).toEqual(a);
    expect(rows(await m.generateAsync(src, { doSample: true, seed: 11, topK: 0 }))).toEqual(a);
    expect(rows(m.generate(src, { doSample: true, seed: 11, topK: 0, useCache: false }))).toEqual(a);
    const others = [1, 2, 3, 4, 5].map((seed) => JSON.stringify(rows(m.generate(src, { doSample: true, seed, topK: 0 }))));
    expect(others.some((o) => o !== JSON.stringify(a))).toBe(true);
  });

  it('topK 1 and temperature → 0 equal greedy', () => {
    for (const seed of [1, 2, 3]) {
      expect(rows(m.generate(src, { doSample: true, seed, topK: 1 }))).toEqual(greedy);
      expect(rows(m.generate(src, { doSample: true, seed, topK: 0, temperature: 1e-4 }))).toEqual(greedy);
      expect(rows(m.generate(src, { doSample: true, seed, topP: 0 }))).toEqual(greedy);
    }
  });

  it("HF's warpers on a fixed logit vector: temperature, then topK (ties kept), then topP", () => {
    const warp = (logits: number[], cfg: { temperature?: number; topK?: number; topP?: number }) => {
      const t = runSync(warpLogits(Float32Array.from(logits), 1, logits.length, { temperature: 1, topK: logits.length, topP: 1, ...cfg }));
      const out = Array.from(t.data);
      t.dispose();
      return out;
    };
    const logits = [2, 1, 0.5, 0, -1];
    // softmax: e^2, e^1, e^0.5, e^0, e^-1 = 7.389, 2.718, 1.649, 1, 0.368 over 13.124 → 0.563, 0.207, 0.126, 0.076, 0.028.
    // Ascending cumulative: 0.028, 0.104, 0.230, 0.437, 1. topP 0.8 removes those <= 0.2: the last two.
    expect(warp(logits, { topP: 0.8 })).toEqual([2, 1, 0.5, -Infinity, -Infinity]);
    // topP 0.5 removes those <= 0.5 (0.028, 0.104, 0.230, 0.437): only the first is left.
    expect(warp(logits, { topP: 0.5 })).toEqual([2, -Infinity, -Infinity, -Infinity, -Infinity]);
    // topP 0.95 removes only the cumulative 0.028 <= 0.05.
    expect(warp(logits, { topP: 0.95 })).toEqual([2, 1, 0.5, 0, -Infinity]);
    // temperature 2 first: logits / 2 = 1, 0.5, 0.25, 0, -0.5 → p 0.375, 0.227, 0.177, 0.138, 0.084; ascending
    // cumulative 0.084, 0.221, 0.398, 0.625, 1: topP 0.8 now removes only the last (0.084 <= 0.2 < 0.221).
    expect(warp(logits, { temperature: 2, topP: 0.8 })).toEqual([1, 0.5, 0.25, 0, -Infinity]);
    // topK 2 before topP 0.9: p over {2, 1} = 0.731, 0.269; cumulative 0.269 > 0.1: both kept.
    expect(warp(logits, { topK: 2, topP: 0.9 })).toEqual([2, 1, -Infinity, -Infinity, -Infinity]);
    // topK keeps every token tied with the k-th largest, as HF's `scores < kth value`.
    expect(warp([1, 3, 3, 0], { topK: 1 })).toEqual([-Infinity, 3, 3, -Infinity]);
    expect(warp([1, 3, 3, 0], { topK: 3 })).toEqual([1, 3, 3, -Infinity]);
  });

  it('draws by inverse CDF over the token ids, skipping zero probabilities', () => {
    const p = Float32Array.from([0.5, 0, 0.25, 0.25]);
    expect([0, 0.49, 0.5, 0.74, 0.75, 0.999999].map((u) => draw(p, u))).toEqual([0, 0, 2, 2, 3, 3]);
    expect(draw(Float32Array.from([0.3, 0.3, 0]), 0.7)).toBe(1); // rounding left u above the total
  });
});

describe('beam search', () => {
  /** The best sequence of source row b by brute force: every sequence of up to maxNew tokens (eos ends one). */
  function bruteForce(m: Transformer, b: number, maxNew: number, lengthPenalty: number): number[] {
    let best: { seq: number[]; score: number } = { seq: [], score: -Infinity };
    const walk = (seq: number[], sum: number) => {
      const lp = nextLogProbs(m, b, seq);
      for (let v = 0; v < V; v++) {
        const next = [...seq, v], s = sum + lp[v], generated = next.length - 1;
        if (v === EOS || generated === maxNew) {
          const score = s / generated ** lengthPenalty;
          if (score > best.score) best = { seq: next, score };
        } else {
          walk(next, s);
        }
      }
    };
    walk([BOS], 0);
    return best.seq;
  }

  for (const lengthPenalty of [1, 0.5, 2])
    it(`with every prefix kept (numBeams = V², 3 new tokens, lengthPenalty ${lengthPenalty}) finds the brute-force best`, () => {
      // numBeams = V² = 25 holds every live prefix of 2 tokens, so no prefix of the best sequence is
      // pruned; earlyStopping 'never' (HF's exact bound) never stops a row that could still improve.
      // (With this model the best sequences have 2 or 3 new tokens, eos among them or not.)
      const m = model(1);
      m.eval();
      const got = rows(m.generate(src, { numBeams: V * V, maxNewTokens: 3, lengthPenalty, earlyStopping: 'never' }));
      for (let b = 0; b < 2; b++) {
        const want = bruteForce(m, b, 3, lengthPenalty);
        expect(got[b].slice(0, want.length), `row ${b}`).toEqual(want);
        expect(got[b].slice(want.length).every((t) => t === 0), `row ${b} padding`).toBe(true);
      }
    });

  it('is the same with and without the caches (beams reorder them) and through generateAsync', async () => {
    const m = model(7, 10);
    for (const earlyStopping of [false, true, 'never'] as const) {
      const opts = { numBeams: 3, earlyStopping, lengthPenalty: 0.7 };
      const cached = rows(m.generate(src, opts));
      expect(rows(m.generate(src, { ...opts, useCache: false }))).toEqual(cached);
      expect(rows(await m.generateAsync(src, opts))).toEqual(cached);
    }
  });
});

describe('generateStream', () => {
  it('yields the tokens generate returns, one Int32Array [B] per step', async () => {
    const m = model();
    for (const opts of [{}, { doSample: true, seed: 4, topP: 0.9 }, { maxNewTokens: 3 }]) {
      const steps: number[][] = [];
      for await (const step of m.generateStream(src, opts)) steps.push(Array.from(step));
      const want = rows(m.generate(src, opts));
      expect(steps.length).toBe(want[0].length - 1);
      expect([0, 1].map((b) => [BOS, ...steps.map((s) => s[b])])).toEqual(want);
    }
  });

  it('stops when the loop breaks, frees its caches, and leaves the model free for the next call', async () => {
    const m = new Transformer({ srcVocab: 7, tgtVocab: V, maxLen: 128, dModel: 64, numHeads: 2, dFF: 64, depth: 2, seed: 1 });
    const s = Tensor.from(new Int32Array(8 * 4).fill(3), [8, 4]);
    const breakEarly = async () => {
      let n = 0;
      for await (const _ of m.generateStream(s, { doSample: true, seed: n, topK: 0, eos: 0 })) if (++n === 2) break;
      m.generate(s, { maxNewTokens: 1 }); // throws ERR_NF_STATE if the stream's program were still queued or running
    };
    await breakEarly();
    const start = process.memoryUsage().arrayBuffers;
    for (let i = 0; i < 50; i++) await breakEarly();
    // Each run holds 2 layers × [8, 128, 128] float caches = 1 MiB; 50 of them kept would be 50 MiB.
    expect(process.memoryUsage().arrayBuffers - start).toBeLessThan(4 * 1024 * 1024);
  });

  it('refuses beams, and reports bad options when called', () => {
    const m = model();
    expect(() => m.generateStream(src, { numBeams: 2 })).toThrow(/beam search is not streamed/);
    expect(() => m.generateStream(src, { maxNewToken: 3 } as never)).toThrow(/did you mean 'maxNewTokens'/);
  });
});

describe('bad options', () => {
  it('are NodeformerErrors naming the option (unknown keys with a did-you-mean)', () => {
    const m = model();
    const cases: [object, RegExp][] = [
      [{ max_new_tokens: 3 }, /Unknown key 'max_new_tokens'/],
      [{ topk: 3 }, /'topk' \(did you mean 'topK'\?\)/],
      [{ numBeam: 2 }, /did you mean 'numBeams'/],
      [{ temprature: 0.5 }, /did you mean 'temperature'/],
      [{ doSample: true, temperature: 0 }, /for options.temperature/],
      [{ topP: 1.5 }, /for options.topP/],
      [{ topK: -1 }, /for options.topK/],
      [{ numBeams: 0 }, /for options.numBeams/],
      [{ doSample: true, numBeams: 2 }, /beam sampling is not supported.*for options.numBeams/],
      [{ lengthPenalty: NaN }, /for options.lengthPenalty/],
      [{ earlyStopping: 'sometimes' }, /for options.earlyStopping/],
      [{ maxNewTokens: 8 }, /for options.maxNewTokens/],
      [{ seed: -1 }, /for seed/],
    ];
    for (const [opts, message] of cases) {
      let error: unknown;
      try {
        m.generate(src, opts as never);
      } catch (e) {
        error = e;
      }
      expect(error, JSON.stringify(opts)).toBeInstanceOf(NodeformerError);
      expect((error as NodeformerError).code).toBe('ERR_NF_INVALID_ARG');
      expect((error as Error).message, JSON.stringify(opts)).toMatch(message);
    }
  });
});
