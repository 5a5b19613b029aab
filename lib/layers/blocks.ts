import { objectArg } from '../errors';
import { Module } from '../module';
import { Random } from '../random';
import { checkTensor, Tensor } from '../tensor';
import { bool, oneOf, positive, positiveInt, probability, seedOf } from './common';
import { accumulate, DropoutSite } from './dropout';
import { MultiHeadAttention } from './attention';
import { ACTIVATIONS, FeedForward, type Activation } from './feedforward';
import { LayerNorm } from './layernorm';

export interface BlockConfig {
  dModel: number;
  numHeads: number;
  dFF: number;
  /** Pre-LN (true, default: ViT, pre-LN Transformers) or post-LN (false: Vaswani et al.). */
  normFirst?: boolean;
  /** Feed-forward activation (default 'gelu'). */
  activation?: Activation;
  /** Dropout on attention weights, the feed-forward hidden layer and each residual branch (default 0). */
  dropout?: number;
  /** LayerNorm eps (default 1e-5). */
  eps?: number;
  seed?: number;
}

function blockConfig(config: BlockConfig): Required<BlockConfig> {
  return {
    dModel: positiveInt('config.dModel', config?.dModel),
    numHeads: positiveInt('config.numHeads', config.numHeads),
    dFF: positiveInt('config.dFF', config.dFF),
    normFirst: bool('config.normFirst', config.normFirst ?? true),
    activation: oneOf('config.activation', config.activation ?? 'gelu', ACTIVATIONS),
    dropout: probability('config.dropout', config.dropout ?? 0),
    eps: positive('config.eps', config.eps ?? 1e-5),
    seed: seedOf(config.seed ?? 0),
  };
}

/** Self-attention options of an encoder block. Masks: bool tensors, true = blocked. */
export interface EncoderBlockOptions {
  attnMask?: Tensor;
  keyPaddingMask?: Tensor;
  causal?: boolean;
  /** Keep this block's attention weights in `lastWeights` [B, H, T, T]. */
  needWeights?: boolean;
}

/**
 * Transformer encoder block: norm1, attn, norm2, mlp.
 * Pre-LN: x = x + drop(attn(norm1(x))); x = x + drop(mlp(norm2(x))).
 * Post-LN: x = norm1(x + drop(attn(x))); x = norm2(x + drop(mlp(x))).
 */
export class EncoderBlock extends Module {
  readonly config: Required<BlockConfig>;
  readonly norm1: LayerNorm;
  readonly attn: MultiHeadAttention;
  readonly norm2: LayerNorm;
  readonly mlp: FeedForward;
  /** The attention weights of the last forward run with needWeights. */
  lastWeights: Tensor<'float32'> | null = null;
  private readonly drop1: DropoutSite;
  private readonly drop2: DropoutSite;

  constructor(config: BlockConfig) {
    super();
    const c = (this.config = blockConfig(config));
    const rng = new Random(c.seed);
    this.norm1 = this.addModule('norm1', new LayerNorm({ dModel: c.dModel, eps: c.eps }));
    this.attn = this.addModule('attn', new MultiHeadAttention({ dModel: c.dModel, numHeads: c.numHeads, dropout: c.dropout, seed: rng.seed() }));
    this.norm2 = this.addModule('norm2', new LayerNorm({ dModel: c.dModel, eps: c.eps }));
    this.mlp = this.addModule('mlp', new FeedForward({ dModel: c.dModel, dFF: c.dFF, activation: c.activation, dropout: c.dropout, seed: rng.seed() }));
    this.drop1 = new DropoutSite(c.dropout, rng.seed());
    this.drop2 = new DropoutSite(c.dropout, rng.seed());
  }

  private attend(x: Tensor, o: EncoderBlockOptions): Tensor<'float32'> {
    const opts = { attnMask: o.attnMask, keyPaddingMask: o.keyPaddingMask, causal: o.causal };
    if (!o.needWeights) return this.attn.forward(x, opts);
    const { output, weights } = this.attn.forward(x, { ...opts, needWeights: true });
    this.lastWeights = weights;
    return output;
  }

  /** x [B, T, D] → [B, T, D]. */
  forward(x: Tensor, options: EncoderBlockOptions = {}): Tensor<'float32'> {
    const xt = checkTensor('x', x, 'float32', [null, null, this.config.dModel]);
    options = objectArg('options', options);
    const t = this.training;
    if (this.config.normFirst) {
      const a = this.attend(this.norm1.forward(xt), options);
      this.drop1.forwardInPlace(a, t);
      const x1 = accumulate(a, xt);
      const m = this.mlp.forward(this.norm2.forward(x1));
      this.drop2.forwardInPlace(m, t);
      return accumulate(m, x1);
    }
    const a = this.attend(xt, options);
    this.drop1.forwardInPlace(a, t);
    const x1 = this.norm1.forwardResidual(a, xt);
    const m = this.mlp.forward(x1);
    this.drop2.forwardInPlace(m, t);
    return this.norm2.forwardResidual(m, x1);
  }

  /** dy [B, T, D] → dx [B, T, D]; accumulates the parameter gradients. */
  backward(dy: Tensor): Tensor<'float32'> {
    const d = checkTensor('dy', dy, 'float32', [null, null, this.config.dModel]);
    if (this.config.normFirst) {
      const dx1 = this.norm2.backward(this.mlp.backward(this.drop2.backward(d)), d);
      const dh = this.attn.backward(this.drop1.backward(dx1)) as Tensor<'float32'>;
      return this.norm1.backward(dh, dx1);
    }
    const ds2 = this.norm2.backward(d);
    const dx1 = accumulate(this.mlp.backward(this.drop2.backward(ds2)), ds2);
    const ds1 = this.norm1.backward(dx1);
    return accumulate(this.attn.backward(this.drop1.backward(ds1)) as Tensor<'float32'>, ds1);
  }
}

/** Options of a decoder block. Masks: bool tensors [B, T] / [B, Tm], true = padding. */
export interface DecoderBlockOptions {
  /** Causal self-attention (default true). */
  causal?: boolean;
  tgtKeyPaddingMask?: Tensor;
  memoryKeyPaddingMask?: Tensor;
}

/**
 * Transformer decoder block: norm1, attn (masked self-attention), norm2, cross_attn (queries from
 * x, keys and values from memory), norm3, mlp; pre-LN or post-LN as EncoderBlock.
 */
export class DecoderBlock extends Module {
  readonly config: Required<BlockConfig>;
  readonly norm1: LayerNorm;
  readonly attn: MultiHeadAttention;
  readonly norm2: LayerNorm;
  readonly cross_attn: MultiHeadAttention;
  readonly norm3: LayerNorm;
  readonly mlp: FeedForward;
  private readonly drops: DropoutSite[];

  constructor(config: BlockConfig) {
    super();
    const c = (this.config = blockConfig(config));
    const rng = new Random(c.seed);
    const attn = () => new MultiHeadAttention({ dModel: c.dModel, numHeads: c.numHeads, dropout: c.dropout, seed: rng.seed() });
    this.norm1 = this.addModule('norm1', new LayerNorm({ dModel: c.dModel, eps: c.eps }));
    this.attn = this.addModule('attn', attn());
    this.norm2 = this.addModule('norm2', new LayerNorm({ dModel: c.dModel, eps: c.eps }));
    this.cross_attn = this.addModule('cross_attn', attn());
    this.norm3 = this.addModule('norm3', new LayerNorm({ dModel: c.dModel, eps: c.eps }));
    this.mlp = this.addModule('mlp', new FeedForward({ dModel: c.dModel, dFF: c.dFF, activation: c.activation, dropout: c.dropout, seed: rng.seed() }));
    this.drops = [0, 1, 2].map(() => new DropoutSite(c.dropout, rng.seed()));
  }

  /** x [B, T, D], memory [B, Tm, D] → [B, T, D]. */
  forward(x: Tensor, memory: Tensor, options: DecoderBlockOptions = {}): Tensor<'float32'> {
    const D = this.config.dModel;
    const xt = checkTensor('x', x, 'float32', [null, null, D]);
    const mem = checkTensor('memory', memory, 'float32', [xt.shape[0], null, D]);
    options = objectArg('options', options);
    const [B, T] = xt.shape, Tm = mem.shape[1];
    if (options.tgtKeyPaddingMask !== undefined) checkTensor('options.tgtKeyPaddingMask', options.tgtKeyPaddingMask, 'bool', [B, T]);
    if (options.memoryKeyPaddingMask !== undefined) checkTensor('options.memoryKeyPaddingMask', options.memoryKeyPaddingMask, 'bool', [B, Tm]);
    const sa = { causal: options.causal ?? true, keyPaddingMask: options.tgtKeyPaddingMask };
    const ca = { memory: mem, keyPaddingMask: options.memoryKeyPaddingMask };
    const [d1, d2, d3] = this.drops;
    const t = this.training;
    if (this.config.normFirst) {
      const a = this.attn.forward(this.norm1.forward(xt), sa);
      d1.forwardInPlace(a, t);
      const x1 = accumulate(a, xt);
      const c = this.cross_attn.forward(this.norm2.forward(x1), ca);
      d2.forwardInPlace(c, t);
      const x2 = accumulate(c, x1);
      const m = this.mlp.forward(this.norm3.forward(x2));
      d3.forwardInPlace(m, t);
      return accumulate(m, x2);
    }
    const a = this.attn.forward(xt, sa);
    d1.forwardInPlace(a, t);
    const x1 = this.norm1.forwardResidual(a, xt);
    const c = this.cross_attn.forward(x1, ca);
    d2.forwardInPlace(c, t);
    const x2 = this.norm2.forwardResidual(c, x1);
    const m = this.mlp.forward(x2);
    d3.forwardInPlace(m, t);
    return this.norm3.forwardResidual(m, x2);
  }

  /** dy [B, T, D] → {dx [B, T, D], dMemory [B, Tm, D]}; accumulates the parameter gradients. */
  backward(dy: Tensor): { dx: Tensor<'float32'>; dMemory: Tensor<'float32'> } {
    const d = checkTensor('dy', dy, 'float32', [null, null, this.config.dModel]);
    const [d1, d2, d3] = this.drops;
    const cross = (g: Tensor<'float32'>) => this.cross_attn.backward(d2.backward(g)) as { dx: Tensor<'float32'>; dMemory: Tensor<'float32'> };
    if (this.config.normFirst) {
      const dx2 = this.norm3.backward(this.mlp.backward(d3.backward(d)), d);
      const c = cross(dx2);
      const dx1 = this.norm2.backward(c.dx, dx2);
      const dh = this.attn.backward(d1.backward(dx1)) as Tensor<'float32'>;
      return { dx: this.norm1.backward(dh, dx1), dMemory: c.dMemory };
    }
    const ds3 = this.norm3.backward(d);
    const dx2 = accumulate(this.mlp.backward(d3.backward(ds3)), ds3);
    const ds2 = this.norm2.backward(dx2);
    const c = cross(ds2);
    const ds1 = this.norm1.backward(accumulate(c.dx, ds2));
    const dx = accumulate(this.attn.backward(d1.backward(ds1)) as Tensor<'float32'>, ds1);
    return { dx, dMemory: c.dMemory };
  }

  /** The per-sequence state of incremental decoding against `memory` (see decodeStep). */
  startDecoding(memory: Tensor<'float32'>, maxT: number, memoryKeyPaddingMask?: Tensor<'bool'>): DecoderState {
    const [B, Tk] = memory.shape;
    return { cache: new Float32Array(B * maxT * 2 * this.config.dModel), kv: this.cross_attn.memoryKV(memory), Tk, maxT,
      memoryKeyPaddingMask };
  }

  /**
   * One decoding step (inference): x [B, 1, D] at position t → [B, 1, D], with causal
   * self-attention over the cached positions 0..t. Equals row t of forward() on the prefix.
   */
  decodeStep(x: Tensor<'float32'>, t: number, s: DecoderState): Tensor<'float32'> {
    const self = (h: Tensor<'float32'>) => this.attn.decodeSelf(h, s.cache, t, s.maxT);
    const cross = (h: Tensor<'float32'>) => this.cross_attn.decodeCross(h, s.kv, s.Tk, s.memoryKeyPaddingMask);
    if (this.config.normFirst) {
      const x1 = accumulate(self(this.norm1.forward(x)), x);
      const x2 = accumulate(cross(this.norm2.forward(x1)), x1);
      return accumulate(this.mlp.forward(this.norm3.forward(x2)), x2);
    }
    const x1 = this.norm1.forwardResidual(self(x), x);
    const x2 = this.norm2.forwardResidual(cross(x1), x1);
    return this.norm3.forwardResidual(this.mlp.forward(x2), x2);
  }
}

/** A DecoderBlock's incremental-decoding state: its self-attention K|V cache and the memory's K|V. */
export interface DecoderState {
  cache: Float32Array;
  kv: Float32Array;
  Tk: number;
  maxT: number;
  memoryKeyPaddingMask?: Tensor<'bool'>;
}
