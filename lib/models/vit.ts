import { invalidArg } from '../errors';
import type { Device } from '../device';
import { checkAttnMask } from '../layers/attention';
import { DecoderBlock, EncoderBlock } from '../layers/blocks';
import { nonEmpty, oneOf, positive, positiveInt, probability, seedOf } from '../layers/common';
import { accumulate, DropoutSite } from '../layers/dropout';
import { ACTIVATIONS, type Activation } from '../layers/feedforward';
import { LayerNorm } from '../layers/layernorm';
import { Linear } from '../layers/linear';
import { PatchEmbedding } from '../layers/patch_embedding';
import { requireSaved, Module, Parameter } from '../module';
import { OptionKeys, type KeySpec } from '../options';
import { loadModel, registerModelClass } from '../persist';
import { op, type Program } from '../program';
import { Random } from '../random';
import { Scope } from '../scope';
import { checkTensor, Tensor } from '../tensor';

export interface ViTConfig {
  /** Image height and width (default 32). */
  imgSize?: number;
  /** Patch size (default 4). */
  patchSize?: number;
  /** Image channels (default 3). */
  inChannels?: number;
  /** Width (default 128). */
  dModel?: number;
  /** Heads (default 4). */
  numHeads?: number;
  /** Feed-forward width (default 512). */
  dFF?: number;
  /** Blocks (default 4). */
  depth?: number;
  /** Dropout (default 0). */
  dropout?: number;
  /** LayerNorm eps (default 1e-5). */
  eps?: number;
  /** Feed-forward activation (default 'gelu'). */
  activation?: Activation;
  /** Initialisation and dropout seed (default 0). */
  seed?: number;
  /** Where the parameters are created: 'cpu' (default) or 'cuda', as `.to(device)` after construction (not saved with the config). */
  device?: Device;
}

const VIT_KEYS: KeySpec<ViTConfig> = { imgSize: true, patchSize: true, inChannels: true, dModel: true, numHeads: true, dFF: true,
  depth: true, dropout: true, eps: true, activation: true, seed: true, device: true };

/** Options of ViTEncoder.forward (and ViTClassifier.forward). */
export interface ViTForwardOptions {
  /** Keep each block's attention weights in `blocks[i].lastWeights`. */
  needWeights?: boolean;
}
const VIT_FORWARD_OPTIONS = new OptionKeys<ViTForwardOptions>('ViTEncoder.forward options', { needWeights: true });

/** Checks a ViT config whose keys were checked already (the ViTConfig fields, with defaults). */
function vitConfig(c: ViTConfig) {
  const config = {
    imgSize: positiveInt('config.imgSize', c.imgSize ?? 32),
    patchSize: positiveInt('config.patchSize', c.patchSize ?? 4),
    inChannels: positiveInt('config.inChannels', c.inChannels ?? 3),
    dModel: positiveInt('config.dModel', c.dModel ?? 128),
    numHeads: positiveInt('config.numHeads', c.numHeads ?? 4),
    dFF: positiveInt('config.dFF', c.dFF ?? 512),
    depth: positiveInt('config.depth', c.depth ?? 4),
    dropout: probability('config.dropout', c.dropout ?? 0),
    eps: positive('config.eps', c.eps ?? 1e-5),
    activation: oneOf('config.activation', c.activation ?? 'gelu', ACTIVATIONS),
    seed: seedOf(c.seed ?? 0),
  };
  if (config.imgSize % config.patchSize !== 0)
    invalidArg('config.patchSize', `a divisor of imgSize (${config.imgSize})`, config.patchSize);
  return config;
}

function blockArgs(c: ReturnType<typeof vitConfig>, seed: number) {
  return { dModel: c.dModel, numHeads: c.numHeads, dFF: c.dFF, normFirst: true, activation: c.activation,
    dropout: c.dropout, eps: c.eps, seed };
}

/**
 * The ViT encoder: patch embedding, CLS token, learned positions, pre-LN blocks, final norm:
 * images [B, C, H, W] → tokens [B, N+1, D]. Parameter names are timm's: patch_embed.proj.*,
 * cls_token [1, 1, D], pos_embed [1, N+1, D], blocks.{i}.*, norm.*.
 */
export class ViTEncoder extends Module {
  readonly config: ReturnType<typeof vitConfig>;
  readonly patch_embed: PatchEmbedding;
  readonly cls_token: Parameter;
  readonly pos_embed: Parameter;
  readonly blocks: EncoderBlock[];
  readonly norm: LayerNorm;
  private readonly drop: DropoutSite;
  private batch = 0;
  /** The keys of this class's config (a subclass adds its own). */
  protected static readonly configKeys: OptionKeys<ViTConfig> = new OptionKeys<ViTConfig>('ViTEncoder config', VIT_KEYS);

  constructor(config: ViTConfig = {}) {
    super();
    const cls = new.target as typeof ViTEncoder;
    const c = (this.config = vitConfig(cls.configKeys.check('config', config, `${cls.name} config`)));
    this.placeOn(config.device);
    const rng = new Random(c.seed);
    this.patch_embed = this.addModule('patch_embed', new PatchEmbedding({ imgSize: c.imgSize, patchSize: c.patchSize,
      inChannels: c.inChannels, dModel: c.dModel, seed: rng.seed() }));
    const n = this.patch_embed.numPatches;
    this.cls_token = this.addParameter('cls_token', [1, 1, c.dModel], rng.normalArray(c.dModel, 0.02));
    this.pos_embed = this.addParameter('pos_embed', [1, n + 1, c.dModel], rng.normalArray((n + 1) * c.dModel, 0.02));
    this.blocks = Array.from({ length: c.depth }, (_, i) => this.addModule(`blocks.${i}`, new EncoderBlock(blockArgs(c, rng.seed()))));
    this.norm = this.addModule('norm', new LayerNorm({ dModel: c.dModel, eps: c.eps }));
    this.drop = new DropoutSite(c.dropout, this.addRng('drop', new Random(rng.seed())));
  }

  /** images [B, C, imgSize, imgSize] → tokens [B, N+1, D] (token 0 is CLS). */
  *forwardProgram(images: Tensor, options: ViTForwardOptions = {}): Program<Tensor<'float32'>> {
    const { inChannels: C, imgSize: S, dModel: D } = this.config;
    const x = nonEmpty('images', checkTensor('images', images, 'float32', [null, C, S, S]), { 0: 'a batch' });
    options = VIT_FORWARD_OPTIONS.check('options', options, `${this.constructor.name}.forward options`);
    const B = x.shape[0], N = this.patch_embed.numPatches, keep = this.activations;
    keep.close();
    const patches = yield* this.patch_embed.forwardOps(x);
    let h = Tensor.empty([B, N + 1, D], 'float32', x.device);
    yield* op('clsPosForward', { B, N, D, out: h.storage, cls: this.cls_token.storage, patches: patches.storage, pos: this.pos_embed.storage });
    patches.dispose();
    yield* this.drop.forwardInPlace(h, this.training);
    for (const blk of this.blocks) {
      h = yield* blk.forwardOps(keep.add(h), { needWeights: options.needWeights });
      this.dropActivations();
    }
    this.batch = B;
    return yield* this.norm.forwardOps(keep.add(h));
  }

  /** d(tokens) [B, N+1, D] → d(images); accumulates the parameter gradients. */
  *backwardProgram(dy: Tensor): Program<Tensor<'float32'>> {
    const B = requireSaved(this.batch || null, 'ViTEncoder'), N = this.patch_embed.numPatches, D = this.config.dModel;
    const tmp = new Scope();
    let d = tmp.add(yield* this.norm.backwardOps(checkTensor('dy', dy, 'float32', [B, N + 1, D])));
    for (let i = this.blocks.length - 1; i >= 0; i--) d = tmp.add(yield* this.blocks[i].backwardOps(d));
    d = tmp.add(yield* this.drop.backward(d));
    const dpatches = tmp.add(Tensor.empty([B, N, D], 'float32', d.device));
    yield* op('clsPosBackward', { B, N, D, dcls: this.cls_token.gradData(), dpatches: dpatches.storage, dpos: this.pos_embed.gradData(), dout: d.storage });
    const dimages = yield* this.patch_embed.backwardOps(dpatches);
    tmp.close();
    return dimages;
  }

  /** The attention weights [B, H, N+1, N+1] of every block for `images` (a forward in eval semantics). */
  attentionMaps(images: Tensor): Tensor<'float32'>[] {
    return this.runOps('attentionMaps', this.attentionMapsOps(images));
  }

  private *attentionMapsOps(images: Tensor): Program<Tensor<'float32'>[]> {
    const mode = this.training;
    this.eval();
    try {
      (yield* this.forwardOps<ViTEncoder>(images, { needWeights: true })).dispose();
      return this.blocks.map((b) => b.lastWeights!);
    } finally {
      this.train(mode);
    }
  }
}
registerModelClass(ViTEncoder);

export interface ViTClassifierConfig extends ViTConfig {
  /** Classes (default 10). */
  numClasses?: number;
}

/** ViT classifier: logits = head(norm(encoder(images))[:, 0]); parameters as ViTEncoder plus head.* [classes, D]. */
export class ViTClassifier extends ViTEncoder {
  declare readonly config: ViTEncoder['config'] & { numClasses: number };
  readonly numClasses: number;
  readonly head: Linear;
  protected static override readonly configKeys: OptionKeys<ViTConfig> =
    new OptionKeys<ViTClassifierConfig>('ViTClassifier config', { ...VIT_KEYS, numClasses: true });

  /** Restores a classifier saved with saveModel (config from the file's metadata, strict state dict). */
  static load(path: string): ViTClassifier {
    return loadModel(path, ViTClassifier);
  }

  constructor(config: ViTClassifierConfig = {}) {
    super(config);
    this.numClasses = positiveInt('config.numClasses', config.numClasses ?? 10);
    this.config = { ...this.config, numClasses: this.numClasses };
    this.head = this.addModule('head', new Linear({ inFeatures: this.config.dModel, outFeatures: this.numClasses,
      seed: new Random(this.config.seed + 1).seed() }));
  }

  /** images [B, C, H, W] → logits [B, numClasses]. */
  override *forwardProgram(images: Tensor, options: ViTForwardOptions = {}): Program<Tensor<'float32'>> {
    const tokens = yield* super.forwardProgram(images, options);
    const [B, T, D] = tokens.shape;
    const cls = this.activations.add(Tensor.empty([B, D], 'float32', tokens.device));
    yield* op('copyRows', { rows: B, cols: D, dst: cls.storage, dstStride: D, src: tokens.storage, srcStride: T * D });
    tokens.dispose();
    return yield* this.head.forwardOps(cls);
  }

  /** dLogits [B, numClasses] → d(images); accumulates the parameter gradients. */
  override *backwardProgram(dLogits: Tensor): Program<Tensor<'float32'>> {
    const dcls = yield* this.head.backwardOps(dLogits);
    const [B, D] = dcls.shape, T = this.patch_embed.numPatches + 1;
    const dtokens = Tensor.zeros([B, T, D], 'float32', dcls.device);
    yield* op('copyRows', { rows: B, cols: D, dst: dtokens.storage, dstStride: T * D, src: dcls.storage, srcStride: D });
    dcls.dispose();
    const dimages = yield* super.backwardProgram(dtokens);
    dtokens.dispose();
    return dimages;
  }
}
registerModelClass(ViTClassifier);

/** The values in host memory: the tensor's own on cpu, a copy of a device tensor's. */
function hostValues(t: Tensor<'float32'>): Float32Array {
  return t.device === 'cpu' ? t.data : t.toArray();
}

/** `host` (a cpu tensor) as a tensor on `device` (itself on cpu). */
function onDevice(host: Tensor<'float32'>, device: Device): Tensor<'float32'> {
  if (device === 'cpu') return host;
  const t = host.to(device);
  host.dispose();
  return t;
}

/**
 * [B, C, H, W] → [B, N, P·P·C], channel-last within each patch (index (py·P + px)·C + c), row-major
 * patches; on the images' device (a cuda tensor is rearranged in a host copy: a data-preparation
 * step, as for the targets of a masked autoencoder).
 */
export function patchify(images: Tensor, patchSize: number): Tensor<'float32'> {
  const x = checkTensor('images', images, 'float32', [null, null, null, null]);
  const [B, C, H, W] = x.shape, P = positiveInt('patchSize', patchSize);
  if (H % P || W % P) invalidArg('images', `H and W multiples of patchSize ${P}`, x);
  const gh = H / P, gw = W / P, out = Tensor.empty([B, gh * gw, P * P * C]);
  const src = hostValues(x), dst = out.data;
  let i = 0;
  for (let b = 0; b < B; b++)
    for (let gy = 0; gy < gh; gy++)
      for (let gx = 0; gx < gw; gx++)
        for (let py = 0; py < P; py++)
          for (let px = 0; px < P; px++)
            for (let c = 0; c < C; c++) dst[i++] = src[((b * C + c) * H + gy * P + py) * W + gx * P + px];
  return onDevice(out, x.device);
}

/** The inverse of patchify for square images: [B, N, P·P·C] → [B, C, imgSize, imgSize], on the patches' device. */
export function unpatchify(patches: Tensor, imgSize: number, patchSize: number, channels: number): Tensor<'float32'> {
  const P = positiveInt('patchSize', patchSize), S = positiveInt('imgSize', imgSize), C = positiveInt('channels', channels);
  if (S % P) invalidArg('patchSize', `a divisor of imgSize (${S})`, P);
  const g = S / P;
  const x = checkTensor('patches', patches, 'float32', [null, g * g, P * P * C]);
  const B = x.shape[0], out = Tensor.empty([B, C, S, S]);
  const src = hostValues(x), dst = out.data;
  let i = 0;
  for (let b = 0; b < B; b++)
    for (let gy = 0; gy < g; gy++)
      for (let gx = 0; gx < g; gx++)
        for (let py = 0; py < P; py++)
          for (let px = 0; px < P; px++)
            for (let c = 0; c < C; c++) dst[((b * C + c) * S + gy * P + py) * S + gx * P + px] = src[i++];
  return onDevice(out, x.device);
}

/** Options of ViTDecoder.forward. Masks are bool tensors with MultiHeadAttention's meaning: true = blocked. */
export interface ViTDecoderOptions {
  /** Causal self-attention over patches (autoregressive) instead of none (parallel reconstruction). */
  causal?: boolean;
  /** Self-attention mask over the N patch positions: [N, N] or [B, N, N]. */
  attnMask?: Tensor;
  /** [B, N]: patch positions no patch may attend to. */
  keyPaddingMask?: Tensor;
  /** [B, Tm] bool, true = padding in memory. */
  memoryKeyPaddingMask?: Tensor;
}

const VIT_DECODER_CONFIG = new OptionKeys<ViTConfig>('ViTDecoder config', VIT_KEYS);
const VIT_DECODER_OPTIONS = new OptionKeys<ViTDecoderOptions>('ViTDecoder.forward options',
  { causal: true, attnMask: true, keyPaddingMask: true, memoryKeyPaddingMask: true });

/**
 * ViT decoder: every patch position starts from mask_token + pos_embed, pre-LN DecoderBlocks
 * cross-attend to the encoder output `memory`, then norm and pred map tokens to patch pixels.
 * Parameters: mask_token [1, 1, D], pos_embed [1, N, D], blocks.{i}.*, norm.*, pred.* [P·P·C, D].
 */
export class ViTDecoder extends Module {
  readonly config: ReturnType<typeof vitConfig>;
  readonly numPatches: number;
  readonly mask_token: Parameter;
  readonly pos_embed: Parameter;
  readonly blocks: DecoderBlock[];
  readonly norm: LayerNorm;
  readonly pred: Linear;
  /** The normalised tokens [B, N, D] of the last forward (the reference's first output); freed by the next forward. */
  tokens: Tensor<'float32'> | null = null;
  private batch = 0;

  constructor(config: ViTConfig = {}) {
    super();
    const c = (this.config = vitConfig(VIT_DECODER_CONFIG.check('config', config)));
    this.placeOn(config.device);
    const rng = new Random(c.seed);
    const n = (this.numPatches = (c.imgSize / c.patchSize) ** 2);
    this.mask_token = this.addParameter('mask_token', [1, 1, c.dModel], new Float32Array(c.dModel));
    this.pos_embed = this.addParameter('pos_embed', [1, n, c.dModel], rng.normalArray(n * c.dModel, 0.02));
    this.blocks = Array.from({ length: c.depth }, (_, i) => this.addModule(`blocks.${i}`, new DecoderBlock(blockArgs(c, rng.seed()))));
    this.norm = this.addModule('norm', new LayerNorm({ dModel: c.dModel, eps: c.eps }));
    const pixels = c.patchSize * c.patchSize * c.inChannels;
    this.pred = this.addModule('pred', new Linear({ inFeatures: c.dModel, outFeatures: pixels, seed: rng.seed() }));
  }

  /** memory [B, Tm, D] → patches [B, N, P·P·C] (channel-last within a patch; see unpatchify). */
  *forwardProgram(memory: Tensor, options: ViTDecoderOptions = {}): Program<Tensor<'float32'>> {
    const D = this.config.dModel, N = this.numPatches;
    const mem = nonEmpty('memory', checkTensor('memory', memory, 'float32', [null, null, D]), { 0: 'a batch', 1: 'a memory length' });
    options = VIT_DECODER_OPTIONS.check('options', options);
    const B = mem.shape[0], keep = this.activations;
    if (options.attnMask !== undefined) checkAttnMask('options.attnMask', options.attnMask, B, N, N);
    if (options.keyPaddingMask !== undefined) checkTensor('options.keyPaddingMask', options.keyPaddingMask, 'bool', [B, N]);
    keep.close();
    let h = Tensor.empty([B, N, D], 'float32', mem.device);
    yield* this.tokenPos(h);
    const opts = { causal: options.causal ?? false, tgtMask: options.attnMask, tgtKeyPaddingMask: options.keyPaddingMask,
      memoryKeyPaddingMask: options.memoryKeyPaddingMask };
    for (const blk of this.blocks) {
      h = yield* blk.forwardOps(keep.add(h), mem, opts);
      this.dropActivations();
    }
    this.tokens = keep.add(yield* this.norm.forwardOps(keep.add(h)));
    this.batch = B;
    return yield* this.pred.forwardOps(this.tokens);
  }

  /** Eval mode: the normalised tokens outlive the forward's other activations. */
  protected override dropActivations(...keep: (Tensor | null)[]): void {
    super.dropActivations(...keep, this.tokens);
  }

  /**
   * dPatches [B, N, P·P·C] (and optionally dTokens [B, N, D] for the normalised tokens) →
   * d(memory) [B, Tm, D]; accumulates the parameter gradients.
   */
  *backwardProgram(dPatches: Tensor, dTokens?: Tensor): Program<Tensor<'float32'>> {
    const B = requireSaved(this.batch || null, 'ViTDecoder'), N = this.numPatches, D = this.config.dModel;
    const tmp = new Scope();
    const dt = tmp.add(yield* this.pred.backwardOps(dPatches));
    if (dTokens !== undefined) yield* accumulate(dt, checkTensor('dTokens', dTokens, 'float32', [B, N, D]));
    let d = tmp.add(yield* this.norm.backwardOps(dt));
    let dMemory: Tensor<'float32'> | null = null;
    for (let i = this.blocks.length - 1; i >= 0; i--) {
      const r = yield* this.blocks[i].backwardOps(d);
      d = tmp.add(r.dx);
      if (dMemory) yield* accumulate(dMemory, tmp.add(r.dMemory));
      else dMemory = r.dMemory;
    }
    yield* this.tokenPos(d, true);
    tmp.close();
    return dMemory!;
  }

  /**
   * The decoder's start, h [B, N, D] = mask_token + pos_embed (mask_token.expand(B, N, -1) +
   * pos_embed), or with `backward` its gradient from d = `h`: mask_token.grad += Σ_{b,n} d,
   * pos_embed.grad += Σ_b d. On cpu the tokenPos ops; on cuda the embedding ops over ids that are
   * all 0 (a one-row table: mask_token), which compute the same.
   */
  private *tokenPos(h: Tensor<'float32'>, backward = false): Program<void> {
    const [B, N, D] = h.shape;
    if (h.device === 'cpu') {
      if (backward)
        yield* op('tokenPosBackward', { B, N, D, dtoken: this.mask_token.gradData(), dpos: this.pos_embed.gradData(), dout: h.storage });
      else yield* op('tokenPosForward', { B, N, D, out: h.storage, token: this.mask_token.storage, pos: this.pos_embed.storage });
      return;
    }
    const ids = Tensor.zeros([B, N], 'int32', h.device);
    try {
      const dims = { B, T: N, V: 1, D, maxLen: N };
      if (backward)
        yield* op('embeddingBackward', { ...dims, dtable: this.mask_token.gradData(), dpos: this.pos_embed.gradData(), dout: h.storage,
          ids: ids.storage });
      else yield* op('embeddingForward', { ...dims, out: h.storage, ids: ids.storage, table: this.mask_token.storage, pos: this.pos_embed.storage });
    } finally {
      ids.dispose();
    }
  }
}
registerModelClass(ViTDecoder);
