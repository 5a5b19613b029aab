import { invalidArg } from '../validation/errors';
import { uncapturable } from '../core/graph';
import { requireSaved, Module } from '../core/module';
import { OptionKeys } from '../validation/options';
import { registerModelClass } from '../io/persist';
import { op, type OpArgs, type OpName, type Program } from '../core/program';
import { Random } from '../core/random';
import { Scope } from '../core/scope';
import { checkActivation, checkTensor, Tensor, type FloatDType, type Storage } from '../core/tensor';
import type { Device, PlacementConfig } from '../core/device';
import { bool, nonEmpty, positiveInt, probability, seedOf, type Settings } from '../validation/values';
import { Linear } from './linear';
import { headPadding, narrowRows, padAttention, padCols, paddedBackward, padWeights, type HeadPadding, type PaddedAttention } from './attention_width';

export interface MultiHeadAttentionConfig extends PlacementConfig {
  dModel: number;
  /** Heads; without headDim, dModel must be divisible by numHeads. */
  numHeads: number;
  /**
   * Width of each head (default dModel / numHeads; timm's attn_head_dim, the seeds' d_k = d_v):
   * qkv maps dModel → 3·numHeads·headDim and proj numHeads·headDim → dModel, and the scores are
   * scaled by 1/√headDim. Any positive width: numHeads·headDim may be more or less than dModel.
   */
  headDim?: number;
  /** Biases on the projections (default true): the default of qkvBias and projBias. */
  bias?: boolean;
  /** Bias on qkv (default `bias`; timm's qkv_bias). */
  qkvBias?: boolean;
  /** Bias on proj (default `bias`; timm's proj_bias). */
  projBias?: boolean;
  /** Dropout on the attention weights in training mode (default 0). */
  dropout?: number;
  seed?: number;
}

/** Options of MultiHeadAttention.forward. Masks are bool tensors, true = blocked (PyTorch's meaning). */
export interface AttentionOptions {
  /** Keys and values come from memory [B, Tk, D] (cross-attention) instead of x. */
  memory?: Tensor;
  /** [Tq, Tk] or [B, Tq, Tk]. */
  attnMask?: Tensor;
  /** [B, Tk]: true marks padding keys. */
  keyPaddingMask?: Tensor;
  /** Blocks key j for query i when j > i. */
  causal?: boolean;
  /** Also return the attention weights [B, H, Tq, Tk] (before dropout). */
  needWeights?: boolean;
}

const ATTENTION_CONFIG = new OptionKeys<MultiHeadAttentionConfig>('MultiHeadAttention config',
  { dModel: true, numHeads: true, headDim: true, bias: true, qkvBias: true, projBias: true, dropout: true, seed: true, device: true, precision: true });
const ATTENTION_OPTIONS = new OptionKeys<AttentionOptions>('MultiHeadAttention.forward options',
  { memory: true, attnMask: true, keyPaddingMask: true, causal: true, needWeights: true });

/**
 * Checks an attention mask `name`: a bool Tensor [Tq, Tk] or [B, Tq, Tk] (true = blocked).
 * Returns its storage (what the attention ops take).
 */
export function checkAttnMask(name: string, mask: unknown, B: number, Tq: number, Tk: number): Storage<'bool'> {
  const m = checkTensor(name, mask, 'bool');
  const ok = (m.shape.length === 2 && m.shape[0] === Tq && m.shape[1] === Tk) ||
    (m.shape.length === 3 && m.shape[0] === B && m.shape[1] === Tq && m.shape[2] === Tk);
  if (!ok) invalidArg(name, `a bool Tensor of shape [${Tq}, ${Tk}] or [${B}, ${Tq}, ${Tk}]`, m);
  return m.storage;
}

/**
 * Checks config.headDim against dModel and numHeads (already checked): without one, numHeads must
 * divide dModel. Returns the head width.
 */
export function headDimOf(dModel: number, numHeads: number, headDim: number | undefined): number {
  if (headDim === undefined && dModel % numHeads !== 0) invalidArg('config.numHeads', `a divisor of dModel (${dModel}), or a headDim`, numHeads);
  return positiveInt('config.headDim', headDim ?? dModel / numHeads);
}

/** The result of forward with needWeights. */
export interface AttentionWithWeights {
  output: Tensor<'float32'>;
  weights: Tensor<'float32'>;
}

/**
 * What backward reads. `x`, `memory` and the buffers qkv / q / kv and ctx are in the storage dtype the
 * ops ran at (see MultiHeadAttention.storageDType: bfloat16 under precision 'bf16' on 'cuda'); lse is
 * float32 always.
 */
interface Saved {
  x: Tensor<'float32'>;
  memory: Tensor<'float32'> | null;
  dims: { B: number; Tq: number; Tk: number; D: number; H: number; scale: number };
  masks: { causal: boolean; keyPaddingMask: Storage<'bool'> | null; attnMask: Storage<'bool'> | null };
  drop: { dropoutP: number; seed: number; offset: number };
  buffers: { qkv: Storage<'float32'> | null; q: Storage<'float32'> | null; kv: Storage<'float32'> | null; ctx: Storage<'float32'>; lse: Storage<'float32'> };
}

/**
 * Multi-head scaled dot-product attention, self or cross. Parameters: qkv.weight [3I, D] (rows:
 * queries, keys, values — torch.nn.MultiheadAttention's in_proj_weight), qkv.bias [3I],
 * proj.weight [D, I], proj.bias [D], with I = numHeads·headDim (= D by default). A query row
 * whose keys are all blocked outputs 0. With I ≠ D the attention ops run on inputs and weights
 * whose heads are zero-padded (lib/layers/attention_width.ts), which computes the same values.
 * Under precision 'bf16' on 'cuda' the attention ops run with bfloat16 storage (x, memory, the saved
 * projections and context, the output and the activation gradients; the weights' bf16 copies,
 * Parameter.storageFor), biases, parameter gradients, lse and the weights output float32; with padded
 * heads they run on float32 copies instead, converted back to bfloat16.
 */
export class MultiHeadAttention extends Module {
  readonly config: Settings<MultiHeadAttentionConfig>;
  readonly qkv: Linear;
  readonly proj: Linear;
  private readonly dropRng: Random;
  private saved: Saved | null = null;
  /** The ops it runs (Module.ops): attention_width.ts's helpers add copyRows and accumulate (numHeads·headDim ≠ dModel). */
  static override readonly ops: readonly OpName[] = ['attentionForward', 'attentionBackward', 'attentionDecode', 'linearForward', 'copyRows',
    'accumulate', 'packWeights'];
  /** How the heads are padded for the attention ops (null when numHeads·headDim = dModel). */
  private readonly heads: HeadPadding | null;
  /** The zero-padded copies of a forward (null without padding). */
  private padded: PaddedAttention | null = null;

  constructor(config: MultiHeadAttentionConfig) {
    super();
    config = ATTENTION_CONFIG.check('config', config);
    this.placeOn(config);
    const dModel = positiveInt('config.dModel', config.dModel);
    const numHeads = positiveInt('config.numHeads', config.numHeads);
    const headDim = headDimOf(dModel, numHeads, config.headDim);
    const bias = bool('config.bias', config.bias ?? true);
    this.config = {
      dModel, numHeads, headDim, bias, qkvBias: bool('config.qkvBias', config.qkvBias ?? bias),
      projBias: bool('config.projBias', config.projBias ?? bias),
      dropout: probability('config.dropout', config.dropout ?? 0), seed: seedOf(config.seed ?? 0),
    };
    this.heads = headPadding(dModel, numHeads, headDim);
    const rng = new Random(this.config.seed), inner = numHeads * headDim;
    this.qkv = this.addModule('qkv', new Linear({ inFeatures: dModel, outFeatures: 3 * inner, bias: this.config.qkvBias, seed: rng.seed() }));
    this.proj = this.addModule('proj', new Linear({ inFeatures: inner, outFeatures: dModel, bias: this.config.projBias, seed: rng.seed() }));
    this.dropRng = this.addRng('dropout', new Random(rng.seed()));
  }

  /** x [B, Tq, D] → [B, Tq, D]; with needWeights, {output, weights [B, H, Tq, Tk]}. */
  override forward(x: Tensor, options?: AttentionOptions & { needWeights?: false }): Tensor<'float32'>;
  override forward(x: Tensor, options: AttentionOptions & { needWeights: true }): AttentionWithWeights;
  override forward(x: Tensor, options: AttentionOptions = {}): Tensor<'float32'> | AttentionWithWeights {
    return super.forward<MultiHeadAttention>(x, options);
  }

  /** forward on worker threads (see Module.forwardAsync). */
  override forwardAsync(x: Tensor, options?: AttentionOptions & { needWeights?: false }): Promise<Tensor<'float32'>>;
  override forwardAsync(x: Tensor, options: AttentionOptions & { needWeights: true }): Promise<AttentionWithWeights>;
  override forwardAsync(x: Tensor, options: AttentionOptions = {}): Promise<Tensor<'float32'> | AttentionWithWeights> {
    return super.forwardAsync<MultiHeadAttention>(x, options);
  }

  /** The checked program of forward (see Module.forwardOps). */
  override forwardOps(x: Tensor, options?: AttentionOptions & { needWeights?: false }): Program<Tensor<'float32'>>;
  override forwardOps(x: Tensor, options: AttentionOptions & { needWeights: true }): Program<AttentionWithWeights>;
  override forwardOps(x: Tensor, options?: AttentionOptions): Program<Tensor<'float32'> | AttentionWithWeights>;
  override forwardOps(x: Tensor, options: AttentionOptions = {}): Program<Tensor<'float32'> | AttentionWithWeights> {
    return super.forwardOps<MultiHeadAttention>(x, options);
  }

  /**
   * The dtype the attention ops' activations are stored in: this module's activation dtype (bfloat16
   * under precision 'bf16' on 'cuda'), except with padded heads, whose helpers (attention_width.ts)
   * run on float32.
   */
  private get storageDType(): FloatDType {
    return this.heads ? 'float32' : this.activationDType;
  }

  /** `t` in dtype `dt`: itself, or a converted copy kept with the activations. */
  private stored(t: Tensor<'float32'>, dt: FloatDType): Tensor<'float32'> {
    return t.dtype === dt ? t : this.activations.add(t.cast(dt as 'float32'));
  }

  /** A result `t` of the attention ops in this module's activation dtype (a converted tensor freed). */
  private asOutput(t: Tensor<'float32'>): Tensor<'float32'> {
    if (t.dtype === this.activationDType) return t;
    const out = t.cast(this.activationDType) as Tensor;
    t.recycle();
    return out as Tensor<'float32'>;
  }

  /** The forward pass as written (unchecked; forwardOps runs it). */
  *forwardProgram(x: Tensor, options: AttentionOptions = {}): Program<Tensor<'float32'> | AttentionWithWeights> {
    const D = this.config.dModel, H = this.config.numHeads;
    const xin = nonEmpty('x', checkActivation('x', x, [null, null, D]), { 0: 'a batch', 1: 'a sequence length' });
    options = ATTENTION_OPTIONS.check('options', options);
    const [B, Tq] = xin.shape;
    const memoryIn = options.memory === undefined ? null
      : nonEmpty('options.memory', checkActivation('options.memory', options.memory, [B, null, D]), { 1: 'a memory length' });
    const Tk = memoryIn ? memoryIn.shape[1] : Tq;
    const keyPaddingMask = options.keyPaddingMask === undefined ? null
      : checkTensor('options.keyPaddingMask', options.keyPaddingMask, 'bool', [B, Tk]).storage;
    const attnMask = options.attnMask === undefined ? null : checkAttnMask('options.attnMask', options.attnMask, B, Tq, Tk);
    const causal = bool('options.causal', options.causal ?? false);
    const needWeights = bool('options.needWeights', options.needWeights ?? false);
    const p = this.training ? this.config.dropout : 0;
    if (p > 0) uncapturable('attention-weight dropout (its seed is a kernel argument of the attention kernels)');
    const drop = { dropoutP: p, seed: p > 0 ? this.dropRng.seed() : 0, offset: 0 };
    this.activations.close();
    const dt = this.storageDType, xt = this.stored(xin, dt), memory = memoryIn && this.stored(memoryIn, dt);
    const g = this.heads, I = g ? g.W : D;
    this.padded = g ? yield* padAttention(this.activations, g, { x: xt, memory, qkv: this.qkv, proj: this.proj }) : null;
    const saved = (n: number, dtype: FloatDType = dt) => this.activations.add(Tensor.empty([n], dtype as 'float32', xt.device)).storage;
    const buffers = { qkv: memory ? null : saved(B * Tq * 3 * I), q: memory ? saved(B * Tq * I) : null,
      kv: memory ? saved(B * Tk * 2 * I) : null, ctx: saved(B * Tq * I), lse: saved(B * H * Tq, 'float32') };
    const wide = this.padded;
    const out = Tensor.empty([B, Tq, I], dt as 'float32', xt.device);
    const weights = needWeights ? Tensor.empty([B, H, Tq, Tk], 'float32', xt.device) : null;
    const dims = { B, Tq, Tk, D: I, H, scale: g ? g.scale : 0, precision: this.precision };
    const masks = { causal, keyPaddingMask, attnMask };
    const packed = g ? {} : yield* this.packedWeights();
    yield* op('attentionForward', { ...dims, ...masks, ...drop, ...buffers, ...packed, memory: (wide ? wide.memory : memory)?.storage ?? null,
      out: out.storage, weights: weights?.storage ?? null, x: (wide ? wide.x : xt).storage,
      qkvWeight: wide ? wide.qkvWeight.storage : this.qkv.weight.storageFor(dt), qkvBias: (wide ? wide.qkvBias : this.qkv.bias)?.storage ?? null,
      projWeight: wide ? wide.projWeight.storage : this.proj.weight.storageFor(dt),
      projBias: (wide ? wide.projBias : this.proj.bias)?.storage ?? null,
      qkvBiasRounded: wide ? null : this.roundedBias(this.qkv.bias, dt), projBiasRounded: wide ? null : this.roundedBias(this.proj.bias, dt) });
    this.saved = { x: xt, memory, dims, masks, drop, buffers };
    const y = this.asOutput(yield* narrowRows(out, D));
    return weights ? { output: y, weights } : y;
  }

  /**
   * The projections' weights prepacked for the CPU kernels (Linear.packedWeight: null in training
   * mode, on 'cuda' or with prepacking off), as the attention ops take them. Not used with padded
   * heads, whose ops run on padded copies of the weights made for each call.
   */
  private *packedWeights(): Program<{ qkvWeightPacked: Float32Array | null; projWeightPacked: Float32Array | null }> {
    return { qkvWeightPacked: yield* this.qkv.packedWeight(), projWeightPacked: yield* this.proj.packedWeight() };
  }

  /** dy [B, Tq, D] → dx (self-attention) or {dx, dMemory} (cross-attention); accumulates the parameter gradients. */
  *backwardProgram(dy: Tensor): Program<Tensor<'float32'> | { dx: Tensor<'float32'>; dMemory: Tensor<'float32'> }> {
    const s = requireSaved(this.saved, 'MultiHeadAttention');
    checkActivation('dy', dy, s.x.shape);
    // (the saved tensors' dtype is the one forward ran the ops at: storageDType)
    const dt = s.x.dtype as 'float32', tmp = new Scope(dy, s.x, s.memory), dyt = tmp.add(dy.cast(dt));
    try {
      if (this.padded) {
        const r = yield* paddedBackward(this.padded, { ...s.dims, ...s.masks, ...s.drop, ...s.buffers }, dyt, this.qkv, this.proj);
        return r instanceof Tensor ? this.asOutput(r) : { dx: this.asOutput(r.dx), dMemory: this.asOutput(r.dMemory) };
      }
      const dx = Tensor.empty(s.x.shape, dt, s.x.device);
      const dMemory = s.memory ? Tensor.empty(s.memory.shape, dt, s.memory.device) : null;
      yield* op('attentionBackward', { ...s.dims, ...s.masks, ...s.drop, ...s.buffers, memory: s.memory?.storage ?? null,
        dx: dx.storage, dMemory: dMemory?.storage ?? null,
        dQkvWeight: this.qkv.weight.gradData(), dQkvBias: this.qkv.bias?.gradData() ?? null,
        dProjWeight: this.proj.weight.gradData(), dProjBias: this.proj.bias?.gradData() ?? null,
        dout: dyt.storage, x: s.x.storage, qkvWeight: this.qkv.weight.storageFor(dt), projWeight: this.proj.weight.storageFor(dt) });
      return dMemory ? { dx: this.asOutput(dx), dMemory: this.asOutput(dMemory) } : this.asOutput(dx);
    } finally {
      tmp.close();
    }
  }

  /** The K|V cache decodeSelf fills: [B, maxT, 2W] on `device`, W the width the attention ops run at (dModel unless the heads are padded). */
  decodeCache(B: number, maxT: number, device: Device): Tensor<'float32'> {
    // Rows past the step being decoded are never read (the step attends to rows 0..t): no fill.
    return Tensor.empty([B, maxT, 2 * (this.heads ? this.heads.W : this.config.dModel)], 'float32', device);
  }

  /**
   * Incremental self-attention for decoding (inference only): x [B, 1, D] is the new position t;
   * its keys and values are written into `cache` (decodeCache) and it attends to positions 0..t.
   */
  *decodeSelf(x: Tensor<'float32'>, cache: Tensor<'float32'>, t: number, maxT: number): Program<Tensor<'float32'>> {
    return yield* this.decode(x, { cache: cache.storage, t, maxT });
  }

  /**
   * The keys and values [B, Tm, 2W] of `memory` for cross-attention decoding (computed once per
   * sequence), on memory's device: rows W..3W-1 of the (padded) qkv.weight and bias applied to it
   * (W = dModel unless the heads are padded).
   */
  *memoryKV(memory: Tensor<'float32'>): Program<Tensor<'float32'>> {
    const g = this.heads, W = g ? g.W : this.config.dModel, dev = memory.device;
    const [B, Tm] = memory.shape;
    const tmp = new Scope(memory);
    try {
      const w = g ? yield* padWeights(tmp, g, this.qkv, this.proj) : { qkvWeight: this.qkv.weight, qkvBias: this.qkv.bias };
      const mem = tmp.add(memory.cast('float32')); // (decoding runs in float32 under every precision)
      const src = g ? tmp.add(yield* padCols(mem, W)) : mem;
      // The K|V rows of the projection, copied out (a device buffer has no subarray).
      const Wkv = tmp.add(Tensor.empty([2 * W, W], 'float32', dev));
      yield* op('copyRows', { rows: 1, cols: 2 * W * W, dst: Wkv.storage, dstStride: 2 * W * W, src: w.qkvWeight.storage,
        srcStride: 3 * W * W, srcOffset: W * W });
      const bias = w.qkvBias ? tmp.add(Tensor.empty([2 * W], 'float32', dev)) : null;
      if (bias)
        yield* op('copyRows', { rows: 1, cols: 2 * W, dst: bias.storage, dstStride: 2 * W, src: w.qkvBias!.storage, srcStride: 3 * W,
          srcOffset: W });
      const kv = Tensor.empty([B, Tm, 2 * W], 'float32', dev);
      yield* op('linearForward', { rows: B * Tm, inFeatures: W, outFeatures: 2 * W, y: kv.storage, x: src.storage, W: Wkv.storage,
        b: bias?.storage ?? null, precision: this.precision });
      return kv;
    } finally {
      tmp.close();
    }
  }

  /** Incremental cross-attention for decoding: x [B, 1, D] attends to memoryKV(memory) [B, Tk, 2W]. */
  *decodeCross(x: Tensor<'float32'>, kv: Tensor<'float32'>, Tk: number, keyPaddingMask?: Tensor<'bool'>): Program<Tensor<'float32'>> {
    return yield* this.decode(x, { kv: kv.storage, Tk, keyPaddingMask: keyPaddingMask?.storage ?? null });
  }

  /** One attentionDecode step of x [B, 1, D] → [B, 1, D] against `keys` (a cache or a memory's K|V), on padded copies when the heads are. */
  private *decode(x: Tensor<'float32'>, keys: Pick<OpArgs<'attentionDecode'>, 'cache' | 't' | 'maxT' | 'kv' | 'Tk' | 'keyPaddingMask'>):
  Program<Tensor<'float32'>> {
    const g = this.heads, B = x.shape[0], W = g ? g.W : this.config.dModel;
    const tmp = new Scope(x);
    try {
      x = tmp.add(x.cast('float32')); // (decoding runs in float32 under every precision)
      const w = g ? yield* padWeights(tmp, g, this.qkv, this.proj) : null;
      const out = Tensor.empty([B, 1, W], 'float32', x.device);
      const packed = w ? {} : yield* this.packedWeights();
      yield* op('attentionDecode', { B, D: W, H: this.config.numHeads, scale: g ? g.scale : 0, precision: this.precision, out: out.storage,
        x: (g ? tmp.add(yield* padCols(x, W)) : x).storage, ...keys, ...packed,
        qkvWeight: (w ? w.qkvWeight : this.qkv.weight).storage, qkvBias: (w ? w.qkvBias : this.qkv.bias)?.storage ?? null,
        projWeight: (w ? w.projWeight : this.proj.weight).storage, projBias: (w ? w.projBias : this.proj.bias)?.storage ?? null });
      return yield* narrowRows(out, this.config.dModel);
    } finally {
      tmp.close();
    }
  }
}
registerModelClass(MultiHeadAttention);
