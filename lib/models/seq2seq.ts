import { invalidArg, NodeformerError } from '../validation/errors';
import type { Device, PlacementConfig } from '../core/device';
import { headDimOf } from '../layers/attention';
import { DecoderBlock, decoderStackBackward, disposeDecoderState, EncoderBlock, type DecoderState } from '../layers/blocks';
import { bool, nonEmpty, oneOf, positive, positiveInt, probability, seedOf } from '../validation/values';
import { DropoutSite } from '../layers/dropout';
import { ACTIVATIONS, type Activation } from '../layers/feedforward';
import { LayerNorm } from '../layers/layernorm';
import { Linear } from '../layers/linear';
import { requireSaved, Module, Parameter } from '../core/module';
import { native } from '../native/addon';
import { OptionKeys, type KeySpec } from '../validation/options';
import { registerModelClass } from '../io/persist';
import { beamSearch } from '../generation/beam';
import { generationConfig, type GenerateOptions, type GenerationConfig } from '../generation/options';
import { greedyOrSample } from '../generation/search';
import type { StepSource } from '../generation/source';
import { emitTo, tokenStream } from '../generation/stream';
import { op, type OpName, type Program } from '../core/program';
import { Random } from '../core/random';
import { Scope } from '../core/scope';
import { checkActivation, checkTensor, Tensor } from '../core/tensor';

/** Options shared by Encoder, Decoder and Transformer (defaults: Vaswani et al.'s base model). */
export interface SequenceConfig extends PlacementConfig {
  /** Width (default 512). */
  dModel?: number;
  /** Heads (default 8). */
  numHeads?: number;
  /** Width of each head (default dModel / numHeads; the seeds' d_k = d_v): see MultiHeadAttentionConfig.headDim. */
  headDim?: number;
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
}

export interface TokenModelConfig extends SequenceConfig {
  vocabSize: number;
  /** Longest sequence (positions). */
  maxLen: number;
}

const SEQUENCE_KEYS: KeySpec<SequenceConfig> = { dModel: true, numHeads: true, headDim: true, dFF: true, depth: true, dropout: true,
  normFirst: true, activation: true, positional: true, scaleEmbedding: true, eps: true, seed: true, device: true, precision: true };
const TOKEN_MODEL_CONFIG = new OptionKeys<TokenModelConfig>('token model config', { ...SEQUENCE_KEYS, vocabSize: true, maxLen: true });

/** Checks the SequenceConfig fields of a config whose keys were checked already, with defaults. */
function sequenceConfig(c: SequenceConfig) {
  const dModel = positiveInt('config.dModel', c.dModel ?? 512), numHeads = positiveInt('config.numHeads', c.numHeads ?? 8);
  return {
    dModel, numHeads, headDim: headDimOf(dModel, numHeads, c.headDim),
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

/**
 * Checks an int32 token tensor [B, T] with 1 <= T <= maxLen and every id in [0, vocab). Returns
 * it and its ids in host memory (a copy when it lives on a device: token ids are few, and the
 * padding masks are made from them).
 */
function checkTokens(name: string, t: unknown, maxLen: number, vocab: number): [Tensor<'int32'>, Int32Array] {
  const x = nonEmpty(name, checkTensor(name, t, 'int32', [null, null]), { 0: 'a batch' });
  if (x.shape[1] < 1 || x.shape[1] > maxLen) invalidArg(name, `an int32 Tensor [B, T] with 1 <= T <= maxLen (${maxLen})`, x);
  const ids = x.hostValues(), T = x.shape[1];
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
  /** The ops it runs (Module.ops). */
  static override readonly ops: readonly OpName[] = ['embeddingForward', 'embeddingBackward', 'copyRows', 'dropoutForward', 'dropoutBackward', 'accumulate'];
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
    this.placeOn(config);
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
    const d32 = dd.cast('float32'); // (the embedding op has no bf16 kernel: a bfloat16 gradient is converted)
    yield* op('embeddingBackward', { ...this.embedDims(tokens), dtable: this.embedWeight.gradData(),
      dpos: this.pos_embed?.gradData() ?? null, dout: d32.storage, ids: tokens.storage });
    if (d32 !== dd) d32.recycle();
    if (dd !== d) dd.recycle();
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
    return { dModel: c.dModel, numHeads: c.numHeads, headDim: c.headDim, dFF: c.dFF, normFirst: c.normFirst, activation: c.activation,
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
    let d = checkActivation('dy', dy, [null, null, this.config.dModel]);
    const tmp = new Scope(d);
    if (this.norm) d = tmp.add(yield* this.norm.backwardOps(d));
    for (let i = this.blocks.length - 1; i >= 0; i--) d = tmp.replace(d, yield* this.blocks[i].backwardOps(d));
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
    if (this.norm) d = tmp.replace(d, yield* this.norm.backwardOps(d));
    const r = yield* decoderStackBackward(this.blocks, d, tmp);
    yield* this.embedBackward(r.dx);
    tmp.close();
    return r.dMemory;
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

export type { GenerateOptions } from '../generation/options';

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
  return maskOf(tokens.hostValues(), tokens.shape, padIdx, tokens.device);
}

/** paddingMask from the ids in host memory. */
function maskOf(ids: Int32Array, shape: readonly number[], padIdx: number, device: Device): Tensor<'bool'> {
  const d = new Uint8Array(ids.length);
  for (let i = 0; i < ids.length; i++) d[i] = ids[i] === padIdx ? 1 : 0;
  return Tensor.from(d, shape, device);
}

/** The sequence-to-sequence Transformer of Vaswani et al.: encoder.*, decoder.*; padding masks from padIdx. */
export class Transformer extends Module {
  /** The ops it runs (Module.ops): generation's, through lib/generation/logits.ts (greedy: argmax; sampling: topk, softmax; beams: logSoftmax, topk). */
  static override readonly ops: readonly OpName[] = ['copyRows', 'argmax', 'softmax', 'logSoftmax', 'topk'];
  readonly config: Required<Omit<TransformerConfig, keyof SequenceConfig>> & ReturnType<typeof sequenceConfig>;
  readonly encoder: Encoder;
  readonly decoder: Decoder;

  constructor(raw: TransformerConfig) {
    super();
    const config = TRANSFORMER_CONFIG.check('config', raw);
    const base = sequenceConfig(config);
    this.placeOn(config);
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
    dMemory.recycle();
  }

  /**
   * Generates target sequences for src [B, S] with Hugging Face's generation options (camelCase,
   * lib/generation/options.ts): greedy by default; sampling with doSample (temperature, topK, topP,
   * seed); beam search with numBeams > 1 (lengthPenalty, earlyStopping). Starts from `bos` and stops
   * when every sequence has produced `eos` or maxLen tokens exist (maxNewTokens + 1 when given).
   * With the key/value caches (default) each new token costs O(T) attention instead of re-running
   * the prefix; beam search copies the caches along with the beams. Runs in eval mode. Returns int32
   * [B, L] on src's device, bos first, padIdx after a sequence's eos (for beams: each row's best
   * hypothesis). On 'cuda' the caches live on the device; each step copies its chosen tokens (or,
   * sampling and beam search, its logits) to the host.
   */
  generate(src: Tensor, options: GenerateOptions = {}): Tensor<'int32'> {
    return this.runOps('generate', this.generateOps(src, options));
  }

  /** generate with every op on a worker thread, queued behind this model's other calls (see forwardAsync). */
  generateAsync(src: Tensor, options: GenerateOptions = {}): Promise<Tensor<'int32'>> {
    return this.enqueueOps(() => this.generateOps(src, options));
  }

  /**
   * generateAsync as an async iterator over the new tokens, one Int32Array [B] per step as soon as
   * it is chosen (bos is not streamed; a finished sequence streams padIdx):
   * `for await (const step of model.generateStream(src, { maxNewTokens: 20 })) write(step[0])`.
   * Greedy decoding and sampling only (numBeams > 1 throws, as Hugging Face streams no beams).
   * Options are checked when it is called; generation starts at the first read and runs at most one
   * step ahead of the reader. Leaving the loop early stops it and frees its caches (the loop's exit
   * waits for that).
   */
  generateStream(src: Tensor, options: GenerateOptions = {}): AsyncGenerator<Int32Array, void, undefined> {
    checkTokens('src', src, this.config.maxLen, this.config.srcVocab);
    if (this.generationConfig(options).numBeams > 1)
      invalidArg('options.numBeams', '1 in generateStream (beam search is not streamed: use generate)', options.numBeams);
    return tokenStream((channel) => this.enqueueOps(() => this.generateOps(src, options, emitTo(channel))));
  }

  private generationConfig(options: GenerateOptions | undefined): GenerationConfig {
    const c = this.config;
    return generationConfig(options, { maxLen: c.maxLen, vocab: c.tgtVocab, pad: c.padIdx });
  }

  /** The program of generate; `emit` (streaming) receives each step's tokens [B]. */
  *generateOps(src: Tensor, options: GenerateOptions = {}, emit?: (tokens: Int32Array) => Program<void>): Program<Tensor<'int32'>> {
    const [s, srcIds] = checkTokens('src', src, this.config.maxLen, this.config.srcVocab);
    const cfg = this.generationConfig(options);
    const mode = this.training;
    this.eval();
    const tmp = new Scope();
    const states: DecoderState[] = [];
    try {
      const [B, S] = s.shape, nb = cfg.numBeams, rows = B * nb, dev = s.device;
      // Beam search decodes each source row numBeams times side by side: its encoding is repeated.
      const ids = nb === 1 ? srcIds : Int32Array.from({ length: rows * S }, (_, i) => srcIds[Math.floor(i / (S * nb)) * S + (i % S)]);
      const srcRows = nb === 1 ? s : tmp.add(Tensor.from(ids, [rows, S]).to(dev));
      const srcPad = tmp.add(maskOf(ids, [rows, S], this.config.padIdx, dev));
      const memory = tmp.add(yield* this.encoder.forwardOps(srcRows, { keyPaddingMask: srcPad }));
      if (cfg.useCache) states.push(...(yield* this.decoder.startDecoding(memory, cfg.maxLen, srcPad)));
      const source = this.stepSource(rows, memory, srcPad, states);
      const out = nb > 1 ? yield* beamSearch(source, cfg) : yield* greedyOrSample(source, cfg, emit);
      return Tensor.from(out.tokens, [B, out.length]).to(dev);
    } finally {
      disposeDecoderState(...states);
      tmp.close();
      this.train(mode);
    }
  }

  /**
   * The decoder as a StepSource over `rows` sequences against `memory`: with the caches `states`
   * (none: the whole prefix is re-run each step); reorder replaces their caches.
   */
  private stepSource(rows: number, memory: Tensor<'float32'>, srcPad: Tensor<'bool'>, states: DecoderState[]): StepSource {
    const decoder = this.decoder, V = this.config.tgtVocab, dev = memory.device;
    return {
      rows, vocab: V,
      *step(seqs, stride, t) {
        if (states.length) return float32Logits(yield* decoder.decodeStep(Int32Array.from({ length: rows }, (_, r) => seqs[r * stride + t]), t, states));
        const prefix = new Int32Array(rows * (t + 1));
        for (let r = 0; r < rows; r++) prefix.set(seqs.subarray(r * stride, r * stride + t + 1), r * (t + 1));
        const step = new Scope();
        try {
          const tokens = step.add(Tensor.from(prefix, [rows, t + 1]).to(dev));
          const all = step.add(yield* decoder.forwardOps(tokens, memory, { memoryKeyPaddingMask: srcPad }));
          const logits = Tensor.empty([rows, V], all.dtype as 'float32', dev);
          yield* op('copyRows', { rows, cols: V, dst: logits.storage, dstStride: V, src: all.storage, srcStride: (t + 1) * V, srcOffset: t * V });
          return float32Logits(logits);
        } finally {
          step.close();
        }
      },
      *reorder(from, t) {
        for (const st of states) {
          const [, maxT, width] = st.cache.shape, cols = (t + 1) * width;
          const moved = Tensor.empty(st.cache.shape, 'float32', dev);
          try {
            for (let r = 0; r < rows; r++)
              yield* op('copyRows', { rows: 1, cols, dst: moved.storage, dstStride: cols, dstOffset: r * maxT * width,
                src: st.cache.storage, srcStride: cols, srcOffset: from[r] * maxT * width });
          } catch (e) {
            moved.dispose();
            throw e;
          }
          st.cache.dispose();
          st.cache = moved;
        }
      },
    };
  }
}
registerModelClass(Transformer);

/** Logits for the search functions (float32: a bf16 model's bfloat16 logits are converted, the original freed). */
function float32Logits(logits: Tensor<'float32'>): Tensor<'float32'> {
  const f = logits.cast('float32');
  if (f !== logits) logits.dispose();
  return f;
}
