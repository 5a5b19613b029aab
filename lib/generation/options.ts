/**
 * The options of Transformer.generate, generateAsync and generateStream: Hugging Face's generation
 * options in camelCase (max_new_tokens → maxNewTokens, do_sample → doSample, ...) with HF's
 * defaults, plus this library's maxLen and useCache. Checked once, into a GenerationConfig.
 */
import { invalidArg } from '../validation/errors';
import { bool, positive, positiveInt, seedOf } from '../validation/values';
import { OptionKeys } from '../validation/options';

/** Options of Transformer.generate (Hugging Face's GenerationConfig, in camelCase). */
export interface GenerateOptions {
  /** Longest output, the start token included (default: the model's maxLen). maxNewTokens, when given, takes precedence. */
  maxLen?: number;
  /** Tokens to generate at most, the start token not counted (HF max_new_tokens); 1 + maxNewTokens must not pass the model's maxLen. */
  maxNewTokens?: number;
  /** Start token (default 1). */
  bos?: number;
  /** End token: a sequence stops after it; finished sequences are padded with padIdx (default 2). */
  eos?: number;
  /** Use the key/value caches (default true); false recomputes the whole prefix at every step. */
  useCache?: boolean;
  /** Sample the next token instead of taking the most likely one (default false: greedy, or beam search with numBeams > 1). */
  doSample?: boolean;
  /** Sampling: the logits are divided by this before sampling (default 1; > 0; → 0 approaches greedy). */
  temperature?: number;
  /** Sampling: keep only the topK most likely tokens (default 50, as HF; 0 keeps all). Ties with the k-th are kept. */
  topK?: number;
  /** Sampling: keep the smallest set of most likely tokens whose probability reaches topP (nucleus; default 1 = all; in [0, 1]). */
  topP?: number;
  /** Sampling: the seed of the token draws (default: a new one each call); the same seed gives the same tokens. */
  seed?: number;
  /** Beam search with this many beams per sequence (default 1: no beam search). Not with doSample. */
  numBeams?: number;
  /** Beam search: a finished hypothesis scores sum(log p) / length ** lengthPenalty, length = its generated tokens, eos included (default 1). */
  lengthPenalty?: number;
  /**
   * Beam search: when a sequence stops (HF's early_stopping): true, once numBeams hypotheses are
   * finished; false (default), also once no running beam can beat the worst finished one by HF's
   * estimate (the best running score divided by the current length ** lengthPenalty); 'never', only
   * when no running beam can, with the exact bound (the longest possible length when lengthPenalty > 0).
   */
  earlyStopping?: boolean | 'never';
}

export const GENERATE_OPTIONS = new OptionKeys<GenerateOptions>('Transformer.generate options', {
  maxLen: true, maxNewTokens: true, bos: true, eos: true, useCache: true, doSample: true, temperature: true, topK: true,
  topP: true, seed: true, numBeams: true, lengthPenalty: true, earlyStopping: true,
});

/** Checked generation options with their defaults. */
export interface GenerationConfig {
  /** Longest output, the start token included. */
  maxLen: number;
  bos: number;
  eos: number;
  /** The token after a sequence's eos. */
  pad: number;
  useCache: boolean;
  doSample: boolean;
  temperature: number;
  topK: number;
  topP: number;
  seed: number;
  numBeams: number;
  lengthPenalty: number;
  earlyStopping: boolean | 'never';
}

/** Checks `options` for a model of `maxLen` positions and `vocab` target tokens whose padding token is `pad`. */
export function generationConfig(options: GenerateOptions | undefined, model: { maxLen: number; vocab: number; pad: number }): GenerationConfig {
  const o = GENERATE_OPTIONS.check('options', options);
  let maxLen = o.maxLen ?? model.maxLen;
  if (!Number.isInteger(maxLen) || maxLen < 1 || maxLen > model.maxLen) invalidArg('options.maxLen', `an integer in [1, ${model.maxLen}]`, maxLen);
  if (o.maxNewTokens !== undefined) {
    if (!Number.isInteger(o.maxNewTokens) || o.maxNewTokens < 0 || o.maxNewTokens > model.maxLen - 1)
      invalidArg('options.maxNewTokens', `an integer in [0, ${model.maxLen - 1}] (the model's maxLen less the start token)`, o.maxNewTokens);
    maxLen = o.maxNewTokens + 1;
  }
  const V = model.vocab, bos = o.bos ?? 1, eos = o.eos ?? 2;
  for (const [k, v] of [['options.bos', bos], ['options.eos', eos]] as const)
    if (!Number.isInteger(v) || v < 0 || v >= V) invalidArg(k, `a token id in [0, ${V})`, v);
  const topK = o.topK ?? 50, topP = o.topP ?? 1, numBeams = positiveInt('options.numBeams', o.numBeams ?? 1);
  if (!Number.isInteger(topK) || topK < 0) invalidArg('options.topK', 'a non-negative integer (0: no top-k filtering)', topK);
  if (typeof topP !== 'number' || !(topP >= 0 && topP <= 1)) invalidArg('options.topP', 'a number in [0, 1]', topP);
  const lengthPenalty = o.lengthPenalty ?? 1;
  if (typeof lengthPenalty !== 'number' || !Number.isFinite(lengthPenalty)) invalidArg('options.lengthPenalty', 'a finite number', lengthPenalty);
  const earlyStopping = o.earlyStopping ?? false;
  if (typeof earlyStopping !== 'boolean' && earlyStopping !== 'never') invalidArg('options.earlyStopping', "true, false or 'never'", earlyStopping);
  const doSample = bool('options.doSample', o.doSample ?? false);
  if (doSample && numBeams > 1)
    invalidArg('options.numBeams', '1 with doSample (beam sampling is not supported: use doSample or numBeams > 1)', numBeams);
  return {
    maxLen, bos, eos, pad: model.pad, useCache: bool('options.useCache', o.useCache ?? true), doSample,
    temperature: positive('options.temperature', o.temperature ?? 1), topK: Math.min(topK || V, V), topP,
    seed: o.seed === undefined ? Math.floor(Math.random() * 2 ** 32) : seedOf(o.seed), numBeams, lengthPenalty, earlyStopping,
  };
}
