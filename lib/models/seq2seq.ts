import { invalidArg, NodeformerError } from '../errors';
import type { Device } from '../device';
import { DecoderBlock, disposeDecoderState, EncoderBlock, type DecoderState } from '../layers/blocks';
import { bool, disposeAll, nonEmpty, oneOf, positive, positiveInt, probability, seedOf } from '../layers/common';
import { accumulate, DropoutSite } from '../layers/dropout';
import { ACTIVATIONS, type Activation } from '../layers/feedforward';
import { LayerNorm } from '../layers/layernorm';
import { Linear } from '../layers/linear';
import { requireSaved, Module, Parameter } from '../module';
import { native } from '../native';
import { OptionKeys, type KeySpec } from '../options';
import { registerModelClass } from '../persist';
import { op, type Program } from '../program';
import { Random } from '../random';
import { Scope } from '../scope';
import { checkTensor, Tensor, type DType, type TypedArrayOf } from '../tensor';

/** Options shared by Encoder, Decoder and Transformer (defaults: Vaswani et al.'s base model). */
export interface SequenceConfig {
  /** Width (default 512). */
  dModel?: number;
  /** Heads (default 8). */
  numHeads?: number;
  /** Feed-forward width (default 2048). */
  dFF?: number;
  /** Blocks (default 6). */
  depth?: number;
  /** Dropout on embeddings, attention, feed-forward and residual branches (default 0). */
  dropout?: number;
  /** Pre-LN (true; adds a final norm) or post-LN (false, default). */
  normFirst?: boolean;
  /** Feed-forward activation (default 'relu'). */
  activation?: Activation;
  /** 'sinusoidal' (default, no parameters) or 'learned' (pos_embed [1, maxLen, D]). */
  positional?: 'sinusoidal' | 'learned';
  /** Multiply token embeddings by sqrt(dModel) (default false). */
  scaleEmbedding?: boolean;
  /** LayerNorm eps (default 1e-5). */
  eps?: number;
  /** Initialisation and dropout seed (default 0). */
  seed?: number;
  /** Where the parameters are created: 'cpu' (default) or 'cuda', as `.to(device)` after construction (not saved with the config). */
  device?: Device;
}

export interface TokenModelConfig extends SequenceConfig {
  vocabSize: number;
  /** Longest sequence (positions). */
  maxLen: number;
}

const SEQUENCE_KEYS: KeySpec<SequenceConfig> = { dModel: true, numHeads: true, dFF: true, depth: true, dropout: true,
  normFirst: true, activation: true, positional: true, scaleEmbedding: true, eps: true, seed: true, device: true };
const TOKEN_MODEL_CONFIG = new OptionKeys<TokenModelConfig>('token model config', { ...SEQUENCE_KEYS, vocabSize: true, maxLen: true });

/** Checks the SequenceConfig fields of a config whose keys were checked already, with defaults. */
function sequenceConfig(c: SequenceConfig) {
  return {
    dModel: positiveInt('config.dModel', c.dModel ?? 512),
    numHeads: positiveInt('config.numHeads', c.numHeads ?? 8),
    dFF: positiveInt('config.dFF', c.dFF ?? 2048),
    depth: positiveInt('config.depth', c.depth ?? 6),
    dropout: probability('config.dropout', c.dropout ?? 0),
    normFirst: bool('config.normFirst', c.normFirst ?? false),
    activation: oneOf('config.activation', c.activation ?? 'relu', ACTIVATIONS),
    positional: oneOf('config.positional', c.positional ?? 'sinusoidal', ['sinusoidal', 'learned'] as const),
    scaleEmbedding: bool('config.scaleEmbedding', c.scaleEmbedding ?? false),
    eps: positive('config.eps', c.eps ?? 1e-5),
    seed: seedOf(c.seed ?? 0),
  };
}

/** The values of a tensor in host memory: its own storage on cpu, a copy of a device tensor's. */
function hostValues<D extends DType>(t: Tensor<D>): TypedArrayOf<D> {
  return t.device === 'cpu' ? t.data : t.toArray();
}

/**
 * Checks an int32 token tensor [B, T] with 1 <= T <= maxLen and every id in [0, vocab). Returns
 * it and its ids in host memory (a copy when it lives on a device: token ids are few, and the
 * padding masks are made from them).
 */
function checkTokens(name: string, t: unknown, maxLen: number, vocab: number): [Tensor<'int32'>, Int32Array] {
  const x = nonEmpty(name, checkTensor(name, t, 'int32', [null, null]), { 0: 'a batch' });
  if (x.shape[1] < 1 || x.shape[1] > maxLen) invalidArg(name, `an int32 Tensor [B, T] with 1 <= T <= maxLen (${maxLen})`, x);
  const ids = hostValues(x), T = x.shape[1];
  for (let i = 0; i < ids.length; i++)
    if (!(ids[i] >= 0 && ids[i] < vocab))
      throw new NodeformerError('ERR_NF_INVALID_ARG',
        `Expected token ids in [0, ${vocab}) for ${name} but received ${ids[i]} at [${Math.floor(i / T)}, ${i % T}]`);
  return [x, ids];
}

/**
 * What Encoder and Decoder share: the token embedding (embed.weight [V, D]), the positions
 * (sinusoidal, or learned pos_embed [1, maxLen, D]), embedding dropout and the optional final norm.
 */
abstract class TokenModel extends Module {
  readonly config: ReturnType<typeof sequenceConfig> & { vocabSize: number; maxLen: number };
  readonly embedWeight: Parameter;
  readonly pos_embed: Parameter | null;
  protected readonly rng: Random;
  /** The sinusoidal position table [maxLen, D] (a buffer: on the model's device, not in the state dict). */
  private readonly pe: Tensor<'float32'> | null;
  private readonly drop: DropoutSite;
  private savedTokens: Tensor<'int32'> | null = null;

  constructor(raw: TokenModelConfig) {
    super();
    const config = TOKEN_MODEL_CONFIG.check('config', raw, `${new.target.name} config`);
    const base = sequenceConfig(config);
    this.placeOn(config.device);
    const c = (this.config = { ...base, vocabSize: positiveInt('config.vocabSize', config.vocabSize),
      maxLen: positiveInt('config.maxLen', config.maxLen) });
    this.rng = new Random(c.seed);
    this.embedWeight = this.addParameter('embed.weight', [c.vocabSize, c.dModel], this.rng.normalArray(c.vocabSize * c.dModel, 1));
    if (c.positional === 'learned') {
      this.pos_embed = this.addParameter('pos_embed', [1, c.maxLen, c.dModel], this.rng.normalArray(c.maxLen * c.dModel, 0.02));
      this.pe = null;
    } else {
      this.pos_embed = null;
      const pe = new Float32Array(c.maxLen * c.dModel);
      native.sinusoidalEncoding({ len: c.maxLen, D: c.dModel, out: pe });
      this.pe = this.addBuffer('pe', [c.maxLen, c.dModel], pe);
    }
    this.drop = new DropoutSite(c.dropout, this.addRng('drop', new Random(this.rng.seed())));
  }

  /** Registers the final norm (pre-LN only); called by subclasses after their blocks, for parameter order. */
  protected finalNorm(): LayerNorm | null {
    const c = this.config;
    return c.normFirst ? this.addModule('norm', new LayerNorm({ dModel: c.dModel, eps: c.eps })) : null;
  }

  private embedDims(tokens: Tensor<'int32'>) {
    const c = this.config;
    return { B: tokens.shape[0], T: tokens.shape[1], V: c.vocabSize, D: c.dModel, maxLen: c.maxLen,
      scale: c.scaleEmbedding ? Math.sqrt(c.dModel) : 1 };
  }

  /** The position table: the learned pos_embed or the sinusoidal one, [maxLen, D] on the model's device. */
  private get positions(): Tensor<'float32'> {
    return this.pos_embed ?? this.pe!;
  }

  /** drop(embed(tokens) · scale + positions[:T]) → [B, T, D]. */
  protected *embed(tokens: Tensor<'int32'>): Program<Tensor<'float32'>> {
    const dims = this.embedDims(tokens);
    const x = Tensor.empty([dims.B, dims.T, dims.D], 'float32', tokens.device);
    yield* op('embeddingForward', { ...dims, out: x.storage, ids: tokens.storage, table: this.embedWeight.storage,
      pos: this.positions.storage });
    yield* this.drop.forwardInPlace(x, this.training);
    this.savedTokens = tokens;
    return x;
  }

  /** Accumulates embed.weight.grad (and pos_embed.grad) from d(embedded) [B, T, D]. */
  protected *embedBackward(d: Tensor<'float32'>): Program<void> {
    const tokens = requireSaved(this.savedTokens, this.constructor.name);
    const dd = yield* this.drop.backward(d);
    yield* op('embeddingBackward', { ...this.embedDims(tokens), dtable: this.embedWeight.gradData(),
      dpos: this.pos_embed?.gradData() ?? null, dout: dd.storage, ids: tokens.storage });
    if (dd !== d) dd.dispose();
  }

  /**
   * Embeds one token per sequence at position t (inference): tokens [B] (host ids) → [B, 1, D] on
   * the model's device: embed(tokens) · scale + positions[t], the embedding op over row t of the
   * position table.
   */
  protected *embedAt(tokens: Int32Array, t: number): Program<Tensor<'float32'>> {
    const c = this.config, D = c.dModel, B = tokens.length, dev = this.device;
    for (let b = 0; b < B; b++)
      if (!(tokens[b] >= 0 && tokens[b] < c.vocabSize)) invalidArg(`tokens[${b}]`, `a token id in [0, ${c.vocabSize})`, tokens[b]);
    if (!Number.isInteger(t) || t < 0 || t >= c.maxLen) invalidArg('t', `a position in [0, ${c.maxLen})`, t);
    const tmp = new Scope();
    try {
      const ids = tmp.add(Tensor.from(tokens, [B, 1]).to(dev));
      const pos = tmp.add(Tensor.empty([1, D], 'float32', dev));
      yield* op('copyRows', { rows: 1, cols: D, dst: pos.storage, dstStride: D, src: this.positions.storage, srcStride: D, srcOffset: t * D });
      const x = Tensor.empty([B, 1, D], 'float32', dev);
      yield* op('embeddingForward', { B, T: 1, V: c.vocabSize, D, scale: c.scaleEmbedding ? Math.sqrt(D) : 1, maxLen: 1,
        out: x.storage, ids: ids.storage, table: this.embedWeight.storage, pos: pos.storage });
      return x;
    } finally {
      tmp.close();
    }
  }

  protected blockArgs() {
    const c = this.config;
    return { dModel: c.dModel, numHeads: c.numHeads, dFF: c.dFF, normFirst: c.normFirst, activation: c.activation,
      dropout: c.dropout, eps: c.eps, seed: this.rng.seed() };
  }
}

/** Options of Encoder.forward. */
export interface EncoderOptions {
  /** [B, T] bool, true = padding. */
  keyPaddingMask?: Tensor;
}
const ENCODER_OPTIONS = new OptionKeys<EncoderOptions>('Encoder.forward options', { keyPaddingMask: true });

/** Transformer encoder over tokens: embed, positions, EncoderBlocks, norm (pre-LN only). */
export class Encoder extends TokenModel {
  readonly blocks: EncoderBlock[];
  readonly norm: LayerNorm | null;

  constructor(config: TokenModelConfig) {
    super(config);
    this.blocks = Array.from({ length: this.config.depth }, (_, i) => this.addModule(`blocks.${i}`, new EncoderBlock(this.blockArgs())));
    this.norm = this.finalNorm();
  }

  /** tokens [B, T] int32 → [B, T, D]. */
  *forwardProgram(tokens: Tensor, options: EncoderOptions = {}): Program<Tensor<'float32'>> {
    const [tok] = checkTokens('tokens', tokens, this.config.maxLen, this.config.vocabSize), keep = this.activations;
    keep.close();
    options = ENCODER_OPTIONS.check('options', options);
    let x = yield* this.embed(tok);
    for (const blk of this.blocks) {
      x = yield* blk.forwardOps(keep.add(x), { keyPaddingMask: options.keyPaddingMask });
      this.dropActivations();
    }
    return this.norm ? yield* this.norm.forwardOps(keep.add(x)) : x;
  }

  /** dy [B, T, D]: accumulates the parameter gradients (tokens have no gradient). */
  *backwardProgram(dy: Tensor): Program<void> {
    let d = checkTensor('dy', dy, 'float32', [null, null, this.config.dModel]);
    const tmp = new Scope(d);
    if (this.norm) d = tmp.add(yield* this.norm.backwardOps(d));
    for (let i = this.blocks.length - 1; i >= 0; i--) d = tmp.add(yield* this.blocks[i].backwardOps(d));
    yield* this.embedBackward(d);
    tmp.close();
  }
}
registerModelClass(Encoder);

/** Options of Decoder.forward: bool padding masks, true = padding. */
export interface DecoderOptions {
  tgtKeyPaddingMask?: Tensor;
  memoryKeyPaddingMask?: Tensor;
}
const DECODER_OPTIONS = new OptionKeys<DecoderOptions>('Decoder.forward options', { tgtKeyPaddingMask: true, memoryKeyPaddingMask: true });

/** Transformer decoder over tokens: embed, positions, causal DecoderBlocks, norm (pre-LN only), head [V, D] → logits. */
export class Decoder extends TokenModel {
  readonly blocks: DecoderBlock[];
  readonly norm: LayerNorm | null;
  readonly head: Linear;

  constructor(config: TokenModelConfig) {
    super(config);
    this.blocks = Array.from({ length: this.config.depth }, (_, i) => this.addModule(`blocks.${i}`, new DecoderBlock(this.blockArgs())));
    this.norm = this.finalNorm();
    this.head = this.addModule('head', new Linear({ inFeatures: this.config.dModel, outFeatures: this.config.vocabSize, seed: this.rng.seed() }));
  }

  /** tokens [B, T] int32, memory [B, Tm, D] → logits [B, T, V]. */
  *forwardProgram(tokens: Tensor, memory: Tensor, options: DecoderOptions = {}): Program<Tensor<'float32'>> {
    const [tok] = checkTokens('tokens', tokens, this.config.maxLen, this.config.vocabSize), keep = this.activations;
    keep.close();
    options = DECODER_OPTIONS.check('options', options);
    let x = yield* this.embed(tok);
    const opts = { causal: true, tgtKeyPaddingMask: options.tgtKeyPaddingMask, memoryKeyPaddingMask: options.memoryKeyPaddingMask };
    for (const blk of this.blocks) {
      x = yield* blk.forwardOps(keep.add(x), memory, opts);
      this.dropActivations();
    }
    if (this.norm) x = yield* this.norm.forwardOps(keep.add(x));
    return yield* this.head.forwardOps(keep.add(x));
  }

  /** dLogits [B, T, V] → d(memory) [B, Tm, D]; accumulates the parameter gradients. */
  *backwardProgram(dLogits: Tensor): Program<Tensor<'float32'>> {
    const tmp = new Scope();
    let d = tmp.add(yield* this.head.backwardOps(dLogits));
    if (this.norm) d = tmp.add(yield* this.norm.backwardOps(d));
    let dMemory: Tensor<'float32'> | null = null;
    for (let i = this.blocks.length - 1; i >= 0; i--) {
      const r = yield* this.blocks[i].backwardOps(d);
      d = tmp.add(r.dx);
      if (dMemory) yield* accumulate(dMemory, tmp.add(r.dMemory));
      else dMemory = r.dMemory;
    }
    yield* this.embedBackward(d);
    tmp.close();
    return dMemory!;
  }

  /** Per-block decoding state for incremental decoding against `memory` (inference). */
  *startDecoding(memory: Tensor<'float32'>, maxT: number, memoryKeyPaddingMask?: Tensor<'bool'>): Program<DecoderState[]> {
    const states: DecoderState[] = [];
    for (const b of this.blocks) states.push(yield* b.startDecoding(memory, maxT, memoryKeyPaddingMask));
    return states;
  }

  /**
   * One decoding step with the key/value caches: the token of each sequence at position t
   * (tokens [B]) → logits [B, 1, V], equal to position t of forward() on the whole prefix.
   */
  *decodeStep(tokens: Int32Array, t: number, states: DecoderState[]): Program<Tensor<'float32'>> {
    const tmp = new Scope();
    let x = yield* this.embedAt(tokens, t);
    for (let i = 0; i < this.blocks.length; i++) x = yield* this.blocks[i].decodeStep(tmp.add(x), t, states[i]);
    if (this.norm) x = yield* this.norm.forwardOps(tmp.add(x));
    const logits = yield* this.head.forwardOps(tmp.add(x));
    tmp.close();
    return logits;
  }
}
registerModelClass(Decoder);

/** Options of Transformer.generate. */
export interface GenerateOptions {
  /** Longest output, the start token included (default: the model's maxLen). */
  maxLen?: number;
  /** Start token (default 1). */
  bos?: number;
  /** End token: a sequence stops after it; finished sequences are padded with padIdx (default 2). */
  eos?: number;
  /** Use the key/value caches (default true); false recomputes the whole prefix at every step. */
  useCache?: boolean;
}
const GENERATE_OPTIONS = new OptionKeys<GenerateOptions>('Transformer.generate options', { maxLen: true, bos: true, eos: true, useCache: true });

function argmaxRows(logits: Float32Array, rows: number, V: number, rowStride: number, offset: number): Int32Array {
  const out = new Int32Array(rows);
  for (let b = 0; b < rows; b++) {
    let best = 0, bestV = -Infinity;
    for (let v = 0; v < V; v++) {
      const x = logits[b * rowStride + offset + v];
      if (x > bestV) (bestV = x), (best = v);
    }
    out[b] = best;
  }
  return out;
}

export interface TransformerConfig extends SequenceConfig {
  srcVocab: number;
  tgtVocab: number;
  maxLen: number;
  /** The padding token id on both sides (default 0). */
  padIdx?: number;
  /**
   * Mask the target's padding positions as keys of the decoder's self-attention (default true);
   * false: the target is masked causally only (the source's padding stays masked).
   */
  maskTargetPadding?: boolean;
}
const TRANSFORMER_CONFIG = new OptionKeys<TransformerConfig>('Transformer config',
  { ...SEQUENCE_KEYS, srcVocab: true, tgtVocab: true, maxLen: true, padIdx: true, maskTargetPadding: true });

/** A bool mask [B, T] on the tokens' device: true where tokens == padIdx. */
export function paddingMask(tokens: Tensor<'int32'>, padIdx: number): Tensor<'bool'> {
  checkTensor('tokens', tokens, 'int32');
  if (!Number.isInteger(padIdx)) invalidArg('padIdx', 'an integer', padIdx);
  return maskOf(hostValues(tokens), tokens.shape, padIdx, tokens.device);
}

/** paddingMask from the ids in host memory. */
function maskOf(ids: Int32Array, shape: readonly number[], padIdx: number, device: Device): Tensor<'bool'> {
  const d = new Uint8Array(ids.length);
  for (let i = 0; i < ids.length; i++) d[i] = ids[i] === padIdx ? 1 : 0;
  const m = Tensor.from(d, shape);
  return device === 'cpu' ? m : m.to(device);
}

/** The sequence-to-sequence Transformer of Vaswani et al.: encoder.*, decoder.*; padding masks from padIdx. */
export class Transformer extends Module {
  readonly config: Required<Omit<TransformerConfig, keyof SequenceConfig>> & ReturnType<typeof sequenceConfig>;
  readonly encoder: Encoder;
  readonly decoder: Decoder;

  constructor(raw: TransformerConfig) {
    super();
    const config = TRANSFORMER_CONFIG.check('config', raw);
    const base = sequenceConfig(config);
    this.placeOn(config.device);
    const padIdx = config.padIdx ?? 0;
    if (!Number.isInteger(padIdx)) invalidArg('config.padIdx', 'an integer', padIdx);
    this.config = { ...base, srcVocab: positiveInt('config.srcVocab', config.srcVocab),
      tgtVocab: positiveInt('config.tgtVocab', config.tgtVocab), maxLen: positiveInt('config.maxLen', config.maxLen), padIdx,
      maskTargetPadding: bool('config.maskTargetPadding', config.maskTargetPadding ?? true) };
    const rng = new Random(base.seed);
    const shared = { ...base, maxLen: this.config.maxLen, device: this.device };
    this.encoder = this.addModule('encoder', new Encoder({ ...shared, vocabSize: this.config.srcVocab, seed: rng.seed() }));
    this.decoder = this.addModule('decoder', new Decoder({ ...shared, vocabSize: this.config.tgtVocab, seed: rng.seed() }));
  }

  /** src [B, S], tgt [B, T] int32 → logits [B, T, tgtVocab]. */
  *forwardProgram(src: Tensor, tgt: Tensor): Program<Tensor<'float32'>> {
    const [s, srcIds] = checkTokens('src', src, this.config.maxLen, this.config.srcVocab);
    const [t, tgtIds] = checkTokens('tgt', tgt, this.config.maxLen, this.config.tgtVocab);
    if (s.shape[0] !== t.shape[0]) invalidArg('tgt', `an int32 Tensor with batch ${s.shape[0]} (as src)`, t);
    const keep = this.activations, pad = this.config.padIdx;
    keep.close();
    const srcPad = keep.add(maskOf(srcIds, s.shape, pad, s.device));
    const tgtPad = this.config.maskTargetPadding ? keep.add(maskOf(tgtIds, t.shape, pad, t.device)) : undefined;
    const memory = keep.add(yield* this.encoder.forwardOps(s, { keyPaddingMask: srcPad }));
    return yield* this.decoder.forwardOps(t, memory, { tgtKeyPaddingMask: tgtPad, memoryKeyPaddingMask: srcPad });
  }

  /** dLogits [B, T, tgtVocab]: accumulates every parameter gradient. */
  *backwardProgram(dLogits: Tensor): Program<void> {
    const dMemory = yield* this.decoder.backwardOps(dLogits);
    yield* this.encoder.backwardOps(dMemory);
    dMemory.dispose();
  }

  /**
   * Greedy decoding: starting from `bos`, appends the most likely next token until every
   * sequence has produced `eos` or maxLen tokens exist. With the key/value caches (default) each
   * new token costs O(T) attention instead of re-running the prefix. Runs in eval mode.
   * Returns int32 [B, L] (L <= maxLen) on src's device, bos first, padIdx after a sequence's eos.
   * On 'cuda' the caches live on the device; each step copies its logits [B, V] to the host for
   * the argmax (greedy decoding decides there whether to go on).
   */
  generate(src: Tensor, options: GenerateOptions = {}): Tensor<'int32'> {
    return this.runOps('generate', this.generateOps(src, options));
  }

  /** generate with every op on a worker thread, queued behind this model's other calls (see forwardAsync). */
  generateAsync(src: Tensor, options: GenerateOptions = {}): Promise<Tensor<'int32'>> {
    return this.enqueueOps(() => this.generateOps(src, options));
  }

  /** The program of generate. */
  *generateOps(src: Tensor, options: GenerateOptions = {}): Program<Tensor<'int32'>> {
    const [s, srcIds] = checkTokens('src', src, this.config.maxLen, this.config.srcVocab);
    options = GENERATE_OPTIONS.check('options', options);
    const maxLen = options.maxLen ?? this.config.maxLen;
    if (!Number.isInteger(maxLen) || maxLen < 1 || maxLen > this.config.maxLen)
      invalidArg('options.maxLen', `an integer in [1, ${this.config.maxLen}]`, maxLen);
    const bos = options.bos ?? 1, eos = options.eos ?? 2, pad = this.config.padIdx, V = this.config.tgtVocab;
    for (const [k, v] of [['options.bos', bos], ['options.eos', eos]] as const)
      if (!Number.isInteger(v) || v < 0 || v >= V) invalidArg(k, `a token id in [0, ${V})`, v);
    const useCache = bool('options.useCache', options.useCache ?? true);
    const mode = this.training;
    this.eval();
    const tmp = new Scope();
    let states: DecoderState[] | null = null;
    try {
      const B = s.shape[0], dev = s.device;
      const srcPad = tmp.add(maskOf(srcIds, s.shape, pad, dev));
      const memory = tmp.add(yield* this.encoder.forwardOps(s, { keyPaddingMask: srcPad }));
      if (useCache) states = yield* this.decoder.startDecoding(memory, maxLen, srcPad);
      const out = new Int32Array(B * maxLen).fill(pad);
      const done = new Uint8Array(B);
      let current: Int32Array = new Int32Array(B).fill(bos);
      let L = 1;
      for (let b = 0; b < B; b++) out[b * maxLen] = bos;
      for (let t = 0; t + 1 < maxLen && done.some((d) => !d); t++) {
        let next: Int32Array;
        if (states) {
          const logits = yield* this.decoder.decodeStep(current, t, states);
          next = argmaxRows(hostValues(logits), B, V, V, 0);
          logits.dispose();
        } else {
          const prefix = new Int32Array(B * (t + 1));
          for (let b = 0; b < B; b++) prefix.set(out.subarray(b * maxLen, b * maxLen + t + 1), b * (t + 1));
          const tokens = tmp.add(Tensor.from(prefix, [B, t + 1]).to(dev));
          const logits = yield* this.decoder.forwardOps(tokens, memory, { memoryKeyPaddingMask: srcPad });
          next = argmaxRows(hostValues(logits), B, V, (t + 1) * V, t * V);
          disposeAll(logits, tokens);
        }
        for (let b = 0; b < B; b++) {
          if (done[b]) next[b] = pad;
          else if (next[b] === eos) done[b] = 1;
          out[b * maxLen + t + 1] = next[b];
        }
        current = next;
        L = t + 2;
      }
      const result = new Int32Array(B * L);
      for (let b = 0; b < B; b++) result.set(out.subarray(b * maxLen, b * maxLen + L), b * L);
      return Tensor.from(result, [B, L]).to(dev);
    } finally {
      if (states) disposeDecoderState(...states);
      tmp.close();
      this.train(mode);
    }
  }
}
registerModelClass(Transformer);
