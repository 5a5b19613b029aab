/**
 * Trains the sequence-to-sequence Transformer on the date task (./dates.ts) with teacher forcing,
 * label smoothing, AdamW and the inverse-square-root warmup, then scores greedy `generate` on
 * the held-out dates by exact match.
 */
import { setImmediate as nextTurn } from 'node:timers/promises';

import { AdamW, clipGradNorm, crossEntropy, inverseSqrtWarmup, Tensor, Transformer } from '../../lib/index';
import { batchTensors, BOS, DateTask, decode, EOS, MAX_SRC, PAD, TGT_LEN, VOCAB, type Pair } from './dates';

export interface Seq2seqOptions {
  /** Optimizer steps. */
  steps: number;
  batchSize: number;
  dModel: number;
  numHeads: number;
  dFF: number;
  /** Blocks in the encoder and in the decoder. */
  depth: number;
  /** Warmup steps of the inverse-square-root schedule. */
  warmupSteps: number;
  /** Multiplies the schedule (Vaswani et al. use 1 with dModel 512). */
  lrFactor: number;
  labelSmoothing: number;
  weightDecay: number;
  /** Held-out dates scored at the end. */
  testDates: number;
  /** Other held-out dates scored at each progress report. */
  validDates: number;
  seed: number;
}

export const DEFAULTS: Seq2seqOptions = {
  steps: 1500, batchSize: 64, dModel: 64, numHeads: 4, dFF: 128, depth: 3, warmupSteps: 200, lrFactor: 1,
  labelSmoothing: 0.1, weightDecay: 0.01, testDates: 1000, validDates: 200, seed: 1,
};

/** Progress of one reporting interval. */
export interface Progress {
  step: number;
  /** Mean loss over the interval. */
  loss: number;
  /** Exact-match accuracy on the validation dates. */
  validAccuracy: number;
  lr: number;
  /** Training time so far (validation excluded). */
  seconds: number;
}

export interface Seq2seqResult {
  model: Transformer;
  /** Exact-match accuracy of greedy decoding on the held-out set, in [0, 1]. */
  accuracy: number;
  /** Every held-out pair with the model's output. */
  predictions: { src: string; want: string; got: string }[];
  /** Training time (validation excluded). */
  trainSeconds: number;
  /** The step whose weights the model holds: the last one with the best validation exact match. */
  bestStep: number;
}

/** Greedy decoding (key/value cache) of `pairs`' sources, in batches; returns the decoded strings. */
export function translate(model: Transformer, pairs: Pair[], batchSize = 250): string[] {
  const out: string[] = [];
  for (let i = 0; i < pairs.length; i += batchSize) {
    const chunk = pairs.slice(i, i + batchSize);
    const { src, S } = batchTensors(chunk);
    using srcT = Tensor.from(src, [chunk.length, S]);
    using gen = model.generate(srcT, { maxLen: TGT_LEN, bos: BOS, eos: EOS });
    const L = gen.shape[1];
    for (let b = 0; b < chunk.length; b++) out.push(decode(gen.data.subarray(b * L, (b + 1) * L)));
  }
  return out;
}

/** Greedy-decodes `pairs` and scores exact matches (an empty set scores 0). */
export function exactMatch(model: Transformer, pairs: Pair[]): Pick<Seq2seqResult, 'accuracy' | 'predictions'> {
  const got = translate(model, pairs);
  const predictions = pairs.map((p, i) => ({ src: p.src, want: p.tgt, got: got[i] }));
  return { accuracy: predictions.length ? predictions.filter((p) => p.got === p.want).length / predictions.length : 0, predictions };
}

/**
 * Trains and evaluates; the validation dates are scored every `every` steps (and at the last),
 * `onProgress` is called then, and the model ends with the weights of the last best-scoring
 * evaluation (the inverse-square-root schedule never anneals, so the last step's weights can
 * sit on a bump of the loss). Each step yields to the event loop once: the GC's finalizers of
 * native tensors run there, so a loop that never yields would hold every step's intermediates
 * until it ends.
 */
export async function trainSeq2seq(options: Partial<Seq2seqOptions> = {}, onProgress?: (p: Progress) => void, every = 100): Promise<Seq2seqResult> {
  const o = { ...DEFAULTS, ...options };
  const task = new DateTask({ seed: o.seed, testDates: o.testDates, validDates: o.validDates });
  const model = new Transformer({ srcVocab: VOCAB, tgtVocab: VOCAB, maxLen: Math.max(MAX_SRC, TGT_LEN), padIdx: PAD,
    dModel: o.dModel, numHeads: o.numHeads, dFF: o.dFF, depth: o.depth, normFirst: true, seed: o.seed });
  const opt = new AdamW(model.parameters(), { betas: [0.9, 0.98], eps: 1e-9, weightDecay: o.weightDecay });
  const schedule = inverseSqrtWarmup({ dModel: o.dModel, warmupSteps: o.warmupSteps, factor: o.lrFactor });
  const start = performance.now();
  let lossSum = 0, lossCount = 0, evalMs = 0;
  let best = { accuracy: -1, step: 0, weights: {} as Record<string, Float32Array> };
  for (let step = 1; step <= o.steps; step++) {
    await nextTurn();
    const { src, S, tgtIn, tgtOut, T } = batchTensors(task.trainBatch(o.batchSize));
    using srcT = Tensor.from(src, [o.batchSize, S]);
    using inT = Tensor.from(tgtIn, [o.batchSize, T]);
    using outT = Tensor.from(tgtOut, [o.batchSize, T]);
    using logits = model.forward(srcT, inT);
    const { loss, grad } = crossEntropy(logits, outT, { labelSmoothing: o.labelSmoothing, ignoreIndex: PAD });
    opt.zeroGrad();
    model.backward(grad);
    grad.dispose();
    clipGradNorm(opt.params, 1);
    opt.options.lr = schedule(step);
    opt.step();
    lossSum += loss;
    lossCount++;
    if (step % every === 0 || step === o.steps) {
      const seconds = (performance.now() - start - evalMs) / 1000, t0 = performance.now();
      const validAccuracy = exactMatch(model, task.valid).accuracy;
      if (validAccuracy >= best.accuracy)
        best = { accuracy: validAccuracy, step, weights: Object.fromEntries(model.namedParameters().map(([n, p]) => [n, p.toArray()])) };
      evalMs += performance.now() - t0;
      onProgress?.({ step, loss: lossSum / lossCount, validAccuracy, lr: opt.options.lr, seconds });
      lossSum = lossCount = 0;
    }
  }
  const trainSeconds = (performance.now() - start - evalMs) / 1000;
  if (best.step !== o.steps) model.loadStateDict(best.weights);
  return { model, ...exactMatch(model, task.test), trainSeconds, bestStep: best.step };
}
