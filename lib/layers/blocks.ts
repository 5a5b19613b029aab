import { invalidArg } from '../validation/errors';
import { Module } from '../core/module';
import { OptionKeys } from '../validation/options';
import { registerModelClass } from '../io/persist';
import type { OpName, Program } from '../core/program';
import { Random } from '../core/random';
import { Scope } from '../core/scope';
import { checkActivation, checkTensor, Tensor } from '../core/tensor';
import type { PlacementConfig } from '../core/device';
import { bool, nonEmpty, oneOf, positive, positiveInt, probability, seedOf, type Settings } from '../validation/values';
import { accumulate, DropoutSite } from './dropout';
import { DropPathSite } from './drop_path';
import { checkAttnMask, headDimOf, MultiHeadAttention } from './attention';
import { ACTIVATIONS, FeedForward, type Activation } from './feedforward';
import { LayerNorm } from './layernorm';
import { LayerScale } from './layer_scale';

export interface BlockConfig extends PlacementConfig {
  dModel: number;
  numHeads: number;
  dFF: number;
  /** Pre-LN (true, default: ViT, pre-LN Transformers) or post-LN (false: Vaswani et al.). */
  normFirst?: boolean;
  /** Feed-forward activation (default 'gelu'). */
  activation?: Activation;
  /** Dropout on attention weights, the feed-forward hidden layer and each residual branch (default 0): the default of the three below. */
  dropout?: number;
  /** Dropout on the attention weights (default `dropout`; timm's attn_drop). */
  attnDropout?: number;
  /** Dropout on each residual branch's output, after attn.proj and mlp.fc2 (default `dropout`; timm's proj_drop). */
  projDropout?: number;
  /** Dropout on the feed-forward hidden layer (default `dropout`; timm's Mlp drop, = proj_drop). */
  hiddenDropout?: number;
  /** EncoderBlock: stochastic depth, each sample's residual branches dropped with this probability (default 0; timm's drop_path). */
  dropPath?: number;
  /** LayerNorm eps (default 1e-5). */
  eps?: number;
  /** Width of each attention head (default dModel / numHeads; see MultiHeadAttention). */
  headDim?: number;
  /** Bias on the attention's qkv projection (default true; timm's qkv_bias). */
  qkvBias?: boolean;
  /** Bias on the attention's output projection (default true; timm's proj_bias). */
  projBias?: boolean;
  /** Biases on the feed-forward layers (default true; timm's proj_bias also switches them). */
  mlpBias?: boolean;
  /**
   * EncoderBlock: with a value > 0, LayerScale on both residual branches (ls1, ls2: timm's
   * init_values, their initial value); 0 (default): none.
   */
  initValues?: number;
  seed?: number;
}

const BLOCK_CONFIG = new OptionKeys<BlockConfig>('block config',
  { dModel: true, numHeads: true, dFF: true, normFirst: true, activation: true, dropout: true, attnDropout: true, projDropout: true,
    hiddenDropout: true, dropPath: true, eps: true, headDim: true, qkvBias: true,
    projBias: true, mlpBias: true, initValues: true, seed: true, device: true, precision: true });

function blockConfig(raw: BlockConfig, label: string): Settings<BlockConfig> {
  const config = BLOCK_CONFIG.check('config', raw, label);
  const dropout = probability('config.dropout', config.dropout ?? 0);
  return {
    dModel: positiveInt('config.dModel', config.dModel),
    numHeads: positiveInt('config.numHeads', config.numHeads),
    dFF: positiveInt('config.dFF', config.dFF),
    normFirst: bool('config.normFirst', config.normFirst ?? true),
    activation: oneOf('config.activation', config.activation ?? 'gelu', ACTIVATIONS),
    dropout,
    attnDropout: probability('config.attnDropout', config.attnDropout ?? dropout),
    projDropout: probability('config.projDropout', config.projDropout ?? dropout),
    hiddenDropout: probability('config.hiddenDropout', config.hiddenDropout ?? dropout),
    dropPath: probability('config.dropPath', config.dropPath ?? 0),
    eps: positive('config.eps', config.eps ?? 1e-5),
    headDim: headDimOf(positiveInt('config.dModel', config.dModel), positiveInt('config.numHeads', config.numHeads), config.headDim),
    qkvBias: bool('config.qkvBias', config.qkvBias ?? true),
    projBias: bool('config.projBias', config.projBias ?? true),
    mlpBias: bool('config.mlpBias', config.mlpBias ?? true),
    initValues: config.initValues === undefined || config.initValues === 0 ? 0 : positive('config.initValues', config.initValues),
    seed: seedOf(config.seed ?? 0),
  };
}

/** The attention of a block: its width, heads, biases and dropout. */
function attentionOf(c: Settings<BlockConfig>, seed: number): MultiHeadAttention {
  return new MultiHeadAttention({ dModel: c.dModel, numHeads: c.numHeads, headDim: c.headDim, qkvBias: c.qkvBias, projBias: c.projBias,
    dropout: c.attnDropout, seed });
}

/** The feed-forward layer of a block. */
function mlpOf(c: Settings<BlockConfig>, seed: number): FeedForward {
  return new FeedForward({ dModel: c.dModel, dFF: c.dFF, activation: c.activation, dropout: c.hiddenDropout, bias: c.mlpBias, seed });
}

/** Self-attention options of an encoder block. Masks: bool tensors, true = blocked. */
export interface EncoderBlockOptions {
  attnMask?: Tensor;
  keyPaddingMask?: Tensor;
  causal?: boolean;
  /** Keep this block's attention weights in `lastWeights` [B, H, T, T]. */
  needWeights?: boolean;
}

const ENCODER_BLOCK_OPTIONS = new OptionKeys<EncoderBlockOptions>('EncoderBlock.forward options',
  { attnMask: true, keyPaddingMask: true, causal: true, needWeights: true });

/**
 * Transformer encoder block: norm1, attn, norm2, mlp (and with initValues, LayerScale ls1, ls2).
 * Pre-LN: x = x + path(drop(ls1(attn(norm1(x))))); x = x + path(drop(ls2(mlp(norm2(x))))).
 * Post-LN: x = norm1(x + path(drop(ls1(attn(x))))); x = norm2(x + path(drop(ls2(mlp(x))))).
 * drop: projDropout; path: drop path (dropPath), per sample.
 */
export class EncoderBlock extends Module {
  /** The ops it runs (Module.ops). */
  static override readonly ops: readonly OpName[] = ['dropoutForward', 'dropoutBackward', 'accumulate', 'gemm'];
  readonly config: Settings<BlockConfig>;
  readonly norm1: LayerNorm;
  readonly attn: MultiHeadAttention;
  readonly norm2: LayerNorm;
  readonly mlp: FeedForward;
  /** LayerScale of the attention and MLP branches (null without initValues). */
  readonly ls1: LayerScale | null;
  readonly ls2: LayerScale | null;
  /** The attention weights of the last forward run with needWeights. */
  lastWeights: Tensor<'float32'> | null = null;
  private readonly drop1: DropoutSite;
  private readonly drop2: DropoutSite;
  private readonly path1: DropPathSite;
  private readonly path2: DropPathSite;

  constructor(config: BlockConfig) {
    super();
    const c = (this.config = blockConfig(config, 'EncoderBlock config'));
    this.placeOn(config);
    const rng = new Random(c.seed);
    this.norm1 = this.addModule('norm1', new LayerNorm({ dModel: c.dModel, eps: c.eps }));
    this.attn = this.addModule('attn', attentionOf(c, rng.seed()));
    const ls = (name: string) => c.initValues > 0 ? this.addModule(name, new LayerScale({ dModel: c.dModel, initValues: c.initValues })) : null;
    this.ls1 = ls('ls1');
    this.norm2 = this.addModule('norm2', new LayerNorm({ dModel: c.dModel, eps: c.eps }));
    this.mlp = this.addModule('mlp', mlpOf(c, rng.seed()));
    this.ls2 = ls('ls2');
    this.drop1 = new DropoutSite(c.projDropout, this.addRng('drop1', new Random(rng.seed())));
    this.drop2 = new DropoutSite(c.projDropout, this.addRng('drop2', new Random(rng.seed())));
    const path = (name: string) => new DropPathSite(c.dropPath, c.dropPath > 0 ? this.addRng(name, new Random(rng.seed())) : new Random(0));
    this.path1 = path('drop_path1');
    this.path2 = path('drop_path2');
  }

  private *attend(x: Tensor, o: EncoderBlockOptions): Program<Tensor<'float32'>> {
    const opts = { attnMask: o.attnMask, keyPaddingMask: o.keyPaddingMask, causal: o.causal };
    if (!o.needWeights) return yield* this.attn.forwardOps(x, opts);
    const { output, weights } = yield* this.attn.forwardOps(x, { ...opts, needWeights: true });
    this.lastWeights = weights;
    return output;
  }

  /**
   * A residual branch's output (a tensor of its own) through its LayerScale (the unscaled output is
   * kept for backward), dropout (in place) and drop path (a new tensor: the input is freed).
   */
  private *branch(ls: LayerScale | null, drop: DropoutSite, path: DropPathSite, out: Tensor<'float32'>): Program<Tensor<'float32'>> {
    const t = this.training, scaled = ls ? yield* ls.forwardOps(this.activations.add(out)) : out;
    yield* drop.forwardInPlace(scaled, t);
    const kept = yield* path.forward(scaled, t, this.activations);
    if (kept !== scaled) scaled.recycle();
    return kept;
  }

  /** x [B, T, D] → [B, T, D]. */
  *forwardProgram(x: Tensor, options: EncoderBlockOptions = {}): Program<Tensor<'float32'>> {
    const xt = nonEmpty('x', checkActivation('x', x, [null, null, this.config.dModel]), { 0: 'a batch', 1: 'a sequence length' });
    options = ENCODER_BLOCK_OPTIONS.check('options', options);
    const keep = this.activations;
    keep.close();
    if (this.config.normFirst) {
      // x1 = x + attention branch comes out of norm2's fused residual add, its normalised copy beside it.
      const a = yield* this.branch(this.ls1, this.drop1, this.path1, yield* this.attend(keep.add(yield* this.norm1.forwardOps(xt)), options));
      const { out: h, sum: x1 } = yield* this.norm2.forwardResidualSum(a, xt, keep);
      a.recycle(); // backward needs nothing of a (norm2 saves the sum)
      // A branch that LayerScale, dropout and drop path leave as it is (no LayerScale; eval, or their
      // p 0) takes x1 as the feed-forward's residual input (on the GPU its add rides on fc2's product).
      // Their backward then passes the gradient through as after any forward in which they did nothing.
      if (!this.ls2 && !this.drop2.activeIn(this.training) && !this.path2.activeIn(this.training))
        return yield* this.mlp.forwardOps(keep.add(h), x1);
      const m = yield* this.branch(this.ls2, this.drop2, this.path2, yield* this.mlp.forwardOps(keep.add(h)));
      return yield* accumulate(m, x1);
    }
    const a = yield* this.branch(this.ls1, this.drop1, this.path1, yield* this.attend(xt, options));
    const x1 = keep.add(yield* this.norm1.forwardResidual(a, xt));
    a.recycle(); // norm1 keeps the sum it normalised; backward needs nothing else of a
    const m = yield* this.branch(this.ls2, this.drop2, this.path2, yield* this.mlp.forwardOps(x1));
    const y = yield* this.norm2.forwardResidual(m, x1);
    m.recycle();
    return y;
  }

  /**
   * dy [B, T, D] → dx [B, T, D]; accumulates the parameter gradients. Each gradient of the main path
   * is freed once the layer that reads it has run (the branches' own, when active, at the end).
   */
  *backwardProgram(dy: Tensor): Program<Tensor<'float32'>> {
    const d = checkActivation('dy', dy, [null, null, this.config.dModel]);
    const tmp = new Scope(d);
    // A branch's gradient back through drop path, dropout and LayerScale (each a new tensor, or g itself when inactive).
    const branch = function* (drop: DropoutSite, path: DropPathSite, ls: LayerScale | null, g: Tensor<'float32'>) {
      const dd = tmp.add(yield* drop.backward(tmp.add(yield* path.backward(g))));
      return ls ? tmp.add(yield* ls.backwardOps(dd)) : dd;
    };
    let dx: Tensor<'float32'>;
    if (this.config.normFirst) {
      const dm = tmp.add(yield* this.mlp.backwardOps(yield* branch(this.drop2, this.path2, this.ls2, d)));
      const dx1 = tmp.replace(dm, yield* this.norm2.backwardOps(dm, d));
      const dh = tmp.add((yield* this.attn.backwardOps(yield* branch(this.drop1, this.path1, this.ls1, dx1))) as Tensor<'float32'>);
      dx = yield* this.norm1.backwardOps(dh, dx1);
    } else {
      const ds2 = tmp.add(yield* this.norm2.backwardOps(d));
      const dx1 = yield* accumulate(tmp.add(yield* this.mlp.backwardOps(yield* branch(this.drop2, this.path2, this.ls2, ds2))), ds2);
      tmp.free(ds2);
      const ds1 = tmp.replace(dx1, yield* this.norm1.backwardOps(dx1));
      dx = yield* accumulate((yield* this.attn.backwardOps(yield* branch(this.drop1, this.path1, this.ls1, ds1))) as Tensor<'float32'>, ds1);
    }
    tmp.close(dx);
    return dx;
  }
}
registerModelClass(EncoderBlock);

/** Options of a decoder block. Masks are bool tensors, true = blocked (padding). */
export interface DecoderBlockOptions {
  /** Causal self-attention (default true). */
  causal?: boolean;
  /** Self-attention mask [T, T] or [B, T, T] (PyTorch's tgt_mask, as MultiHeadAttention's attnMask). */
  tgtMask?: Tensor;
  /** [B, T]: padding positions of x. */
  tgtKeyPaddingMask?: Tensor;
  /** [B, Tm]: padding positions of memory. */
  memoryKeyPaddingMask?: Tensor;
}

const DECODER_BLOCK_OPTIONS = new OptionKeys<DecoderBlockOptions>('DecoderBlock.forward options',
  { causal: true, tgtMask: true, tgtKeyPaddingMask: true, memoryKeyPaddingMask: true });

/**
 * Transformer decoder block: norm1, attn (masked self-attention), norm2, cross_attn (queries from
 * x, keys and values from memory), norm3, mlp; pre-LN or post-LN as EncoderBlock.
 */
export class DecoderBlock extends Module {
  /** The ops it runs (Module.ops). */
  static override readonly ops: readonly OpName[] = ['dropoutForward', 'dropoutBackward', 'accumulate', 'gemm'];
  readonly config: Settings<BlockConfig>;
  readonly norm1: LayerNorm;
  readonly attn: MultiHeadAttention;
  readonly norm2: LayerNorm;
  readonly cross_attn: MultiHeadAttention;
  readonly norm3: LayerNorm;
  readonly mlp: FeedForward;
  private readonly drops: DropoutSite[];

  constructor(config: BlockConfig) {
    super();
    const c = (this.config = blockConfig(config, 'DecoderBlock config'));
    if (c.initValues > 0) invalidArg('config.initValues', '0 (LayerScale is an EncoderBlock option)', c.initValues);
    if (c.dropPath > 0) invalidArg('config.dropPath', '0 (drop path is an EncoderBlock option)', c.dropPath);
    this.placeOn(config);
    const rng = new Random(c.seed);
    const attn = () => attentionOf(c, rng.seed());
    this.norm1 = this.addModule('norm1', new LayerNorm({ dModel: c.dModel, eps: c.eps }));
    this.attn = this.addModule('attn', attn());
    this.norm2 = this.addModule('norm2', new LayerNorm({ dModel: c.dModel, eps: c.eps }));
    this.cross_attn = this.addModule('cross_attn', attn());
    this.norm3 = this.addModule('norm3', new LayerNorm({ dModel: c.dModel, eps: c.eps }));
    this.mlp = this.addModule('mlp', mlpOf(c, rng.seed()));
    this.drops = [1, 2, 3].map((i) => new DropoutSite(c.projDropout, this.addRng(`drop${i}`, new Random(rng.seed()))));
  }

  /** x [B, T, D], memory [B, Tm, D] → [B, T, D]. */
  *forwardProgram(x: Tensor, memory: Tensor, options: DecoderBlockOptions = {}): Program<Tensor<'float32'>> {
    const D = this.config.dModel;
    const xt = nonEmpty('x', checkActivation('x', x, [null, null, D]), { 0: 'a batch', 1: 'a sequence length' });
    const mem = nonEmpty('memory', checkActivation('memory', memory, [xt.shape[0], null, D]), { 1: 'a memory length' });
    options = DECODER_BLOCK_OPTIONS.check('options', options);
    const [B, T] = xt.shape, Tm = mem.shape[1];
    if (options.tgtMask !== undefined) checkAttnMask('options.tgtMask', options.tgtMask, B, T, T);
    if (options.tgtKeyPaddingMask !== undefined) checkTensor('options.tgtKeyPaddingMask', options.tgtKeyPaddingMask, 'bool', [B, T]);
    if (options.memoryKeyPaddingMask !== undefined) checkTensor('options.memoryKeyPaddingMask', options.memoryKeyPaddingMask, 'bool', [B, Tm]);
    const sa = { causal: options.causal ?? true, attnMask: options.tgtMask, keyPaddingMask: options.tgtKeyPaddingMask };
    const ca = { memory: mem, keyPaddingMask: options.memoryKeyPaddingMask };
    const [d1, d2, d3] = this.drops;
    const t = this.training, keep = this.activations;
    keep.close();
    if (this.config.normFirst) {
      // The residual sums x1, x2 come out of the next norm's fused residual add, as EncoderBlock's.
      const a = yield* this.attn.forwardOps(keep.add(yield* this.norm1.forwardOps(xt)), sa);
      yield* d1.forwardInPlace(a, t);
      const n2 = yield* this.norm2.forwardResidualSum(a, xt, keep);
      a.recycle();
      const c = yield* this.cross_attn.forwardOps(keep.add(n2.out), ca);
      yield* d2.forwardInPlace(c, t);
      const n3 = yield* this.norm3.forwardResidualSum(c, n2.sum, keep);
      c.recycle();
      if (!d3.activeIn(t)) return yield* this.mlp.forwardOps(keep.add(n3.out), n3.sum);  // (as EncoderBlock's)
      const m = yield* this.mlp.forwardOps(keep.add(n3.out));
      yield* d3.forwardInPlace(m, t);
      return yield* accumulate(m, n3.sum);
    }
    // Post-LN: each norm keeps the sum it normalised, so the branch outputs are freed at once.
    const a = yield* this.attn.forwardOps(xt, sa);
    yield* d1.forwardInPlace(a, t);
    const x1 = keep.add(yield* this.norm1.forwardResidual(a, xt));
    a.recycle();
    const c = yield* this.cross_attn.forwardOps(x1, ca);
    yield* d2.forwardInPlace(c, t);
    const x2 = keep.add(yield* this.norm2.forwardResidual(c, x1));
    c.recycle();
    const m = yield* this.mlp.forwardOps(x2);
    yield* d3.forwardInPlace(m, t);
    const y = yield* this.norm3.forwardResidual(m, x2);
    m.recycle();
    return y;
  }

  /**
   * dy [B, T, D] → {dx [B, T, D], dMemory [B, Tm, D]}; accumulates the parameter gradients. Each
   * gradient of the main path is freed once the layer that reads it has run.
   */
  *backwardProgram(dy: Tensor): Program<{ dx: Tensor<'float32'>; dMemory: Tensor<'float32'> }> {
    const d = checkActivation('dy', dy, [null, null, this.config.dModel]);
    const [d1, d2, d3] = this.drops;
    const tmp = new Scope(d);
    const cross = function* (self: DecoderBlock, g: Tensor<'float32'>): Program<{ dx: Tensor<'float32'>; dMemory: Tensor<'float32'> }> {
      const r = (yield* self.cross_attn.backwardOps(tmp.add(yield* d2.backward(g)))) as { dx: Tensor<'float32'>; dMemory: Tensor<'float32'> };
      tmp.add(r.dx);
      return r;
    };
    let dx: Tensor<'float32'>, dMemory: Tensor<'float32'>;
    if (this.config.normFirst) {
      const dm = tmp.add(yield* this.mlp.backwardOps(tmp.add(yield* d3.backward(d))));
      const dx2 = tmp.replace(dm, yield* this.norm3.backwardOps(dm, d));
      const c = yield* cross(this, dx2);
      const dx1 = tmp.add(yield* this.norm2.backwardOps(c.dx, dx2));
      tmp.free(c.dx, dx2);
      const dh = tmp.add((yield* this.attn.backwardOps(tmp.add(yield* d1.backward(dx1)))) as Tensor<'float32'>);
      dx = yield* this.norm1.backwardOps(dh, dx1);
      dMemory = c.dMemory;
    } else {
      const ds3 = tmp.add(yield* this.norm3.backwardOps(d));
      const dx2 = yield* accumulate(tmp.add(yield* this.mlp.backwardOps(tmp.add(yield* d3.backward(ds3)))), ds3);
      tmp.free(ds3);
      const ds2 = tmp.replace(dx2, yield* this.norm2.backwardOps(dx2));
      const c = yield* cross(this, ds2);
      const ds1 = tmp.add(yield* this.norm1.backwardOps(yield* accumulate(c.dx, ds2)));
      tmp.free(c.dx, ds2);
      dx = yield* accumulate((yield* this.attn.backwardOps(tmp.add(yield* d1.backward(ds1)))) as Tensor<'float32'>, ds1);
      dMemory = c.dMemory;
    }
    tmp.close(dx, dMemory);
    return { dx, dMemory };
  }

  /**
   * The per-sequence state of incremental decoding against `memory` (see decodeStep), on memory's
   * device; free it with disposeDecoderState when decoding ends.
   */
  *startDecoding(memory: Tensor<'float32'>, maxT: number, memoryKeyPaddingMask?: Tensor<'bool'>): Program<DecoderState> {
    const [B, Tk] = memory.shape;
    const kv = yield* this.cross_attn.memoryKV(memory);
    const cache = this.attn.decodeCache(B, maxT, memory.device);
    return { cache, kv, Tk, maxT, memoryKeyPaddingMask };
  }

  /**
   * One decoding step (inference): x [B, 1, D] at position t → [B, 1, D], with causal
   * self-attention over the cached positions 0..t. Equals row t of forward() on the prefix.
   */
  *decodeStep(x: Tensor<'float32'>, t: number, s: DecoderState): Program<Tensor<'float32'>> {
    const tmp = new Scope(x);
    const self = (h: Tensor<'float32'>) => this.attn.decodeSelf(h, s.cache, t, s.maxT);
    const cross = (h: Tensor<'float32'>) => this.cross_attn.decodeCross(h, s.kv, s.Tk, s.memoryKeyPaddingMask);
    let y: Tensor<'float32'>;
    if (this.config.normFirst) {  // (the residual sums from the next norm's fused add, as in forwardProgram)
      const n2 = yield* this.norm2.forwardResidualSum(tmp.add(yield* self(tmp.add(yield* this.norm1.forwardOps(x)))), x, tmp);
      const n3 = yield* this.norm3.forwardResidualSum(tmp.add(yield* cross(tmp.add(n2.out))), n2.sum, tmp);
      y = yield* this.mlp.forwardOps(tmp.add(n3.out), n3.sum);
    } else {
      const x1 = tmp.add(yield* this.norm1.forwardResidual(tmp.add(yield* self(x)), x));
      const x2 = tmp.add(yield* this.norm2.forwardResidual(tmp.add(yield* cross(x1)), x1));
      y = yield* this.norm3.forwardResidual(tmp.add(yield* this.mlp.forwardOps(x2)), x2);
    }
    tmp.close(y);
    return y;
  }
}
registerModelClass(DecoderBlock);

/**
 * A DecoderBlock's incremental-decoding state: its self-attention K|V cache [B, maxT, 2W] and the
 * memory's K|V [B, Tk, 2W] (W: the attention ops' width, dModel unless the heads are padded).
 */
export interface DecoderState {
  cache: Tensor<'float32'>;
  kv: Tensor<'float32'>;
  Tk: number;
  maxT: number;
  memoryKeyPaddingMask?: Tensor<'bool'>;
}

/** Frees the tensors of decoding states (the caches; the padding mask belongs to the caller). */
export function disposeDecoderState(...states: DecoderState[]): void {
  for (const s of states) {
    s.cache.dispose();
    s.kv.dispose();
  }
}

/**
 * Backward through a stack of decoder blocks, last to first, from `d` (the top's output gradient,
 * owned by `tmp`): the gradient of the stack's input (owned by `tmp`) and of the memory every block
 * cross-attends to, summed over the blocks (the caller's).
 */
export function* decoderStackBackward(blocks: readonly DecoderBlock[], d: Tensor<'float32'>, tmp: Scope):
  Program<{ dx: Tensor<'float32'>; dMemory: Tensor<'float32'> }> {
  let dMemory: Tensor<'float32'> | null = null;
  for (let i = blocks.length - 1; i >= 0; i--) {
    const r = yield* blocks[i].backwardOps(d);
    d = tmp.replace(d, r.dx);
    if (dMemory) {
      yield* accumulate(dMemory, r.dMemory);
      r.dMemory.recycle();
    } else dMemory = r.dMemory;
  }
  return { dx: d, dMemory: dMemory! };
}
