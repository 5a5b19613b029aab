import { invalidArg, objectArg } from '../validation/errors';
import type { Device, PlacementConfig } from '../core/device';
import { checkAttnMask, headDimOf } from '../layers/attention';
import { DecoderBlock, decoderStackBackward, EncoderBlock } from '../layers/blocks';
import { bool, nonEmpty, oneOf, positive, positiveInt, probability, seedOf } from '../validation/values';
import { accumulate, DropoutSite } from '../layers/dropout';
import { ACTIVATIONS, type Activation } from '../layers/feedforward';
import { LayerNorm } from '../layers/layernorm';
import { Linear } from '../layers/linear';
import { checkPatchGrid, imageHW, PatchEmbedding, type ImageSize } from '../layers/patch_embedding';
import { requireSaved, Module, Parameter } from '../core/module';
import { OptionKeys, type KeySpec } from '../validation/options';
import { registerModelClass } from '../io/persist';
import { op, type OpName, type Program } from '../core/program';
import { Random } from '../core/random';
import { Scope } from '../core/scope';
import { checkActivation, checkTensor, Tensor, type Storage } from '../core/tensor';
import { startTokens, startTokensBackward } from './vit_tokens';

/** The config of ViTDecoder, and the part of ViTEncoder's that the decoder shares. */
export interface ViTDecoderConfig extends PlacementConfig {
  /** Image size: square side, or [height, width] (default 32). */
  imgSize?: ImageSize;
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
  /** Dropout (default 0): every site's; ViTEncoder's per-site rates default to it. */
  dropout?: number;
  /** LayerNorm eps (default 1e-5; timm's ViTs use 1e-6, Hugging Face's 1e-12: see fromTimm and loadHfViT). */
  eps?: number;
  /** Feed-forward activation (default 'gelu'). */
  activation?: Activation;
  /** Initialisation and dropout seed (default 0). */
  seed?: number;
}

/** ViTEncoder's config: the decoder's and the variants of timm's VisionTransformer (its argument names in parentheses). */
export interface ViTConfig extends ViTDecoderConfig {
  /** A class token leads the patch tokens (default true; class_token). */
  classToken?: boolean;
  /** pos_embed covers the patches only and is added before the class token is prepended (default false; no_embed_class). */
  noEmbedClass?: boolean;
  /** The final LayerNorm (default true; final_norm): `norm`, or `fc_norm` after pooling with ViTClassifier's fcNorm. */
  finalNorm?: boolean;
  /** Width of each attention head (default dModel / numHeads; timm's Attention attn_head_dim). */
  headDim?: number;
  /** Bias on the attention's qkv (default true; qkv_bias). */
  qkvBias?: boolean;
  /** Bias on the attention's output projection (default true; proj_bias). */
  projBias?: boolean;
  /** Biases on the MLP (default projBias, as timm's proj_bias switches both). */
  mlpBias?: boolean;
  /** LayerScale (ls1.gamma, ls2.gamma) with this initial value when > 0 (default 0: none; init_values). */
  initValues?: number;
  /** Dropout on the attention weights (default `dropout`; attn_drop_rate). */
  attnDropout?: number;
  /** Dropout on the blocks' residual branches (default `dropout`; proj_drop_rate). */
  projDropout?: number;
  /** Dropout on the MLP hidden layer (default `dropout`; timm's Mlp takes proj_drop_rate). */
  hiddenDropout?: number;
  /** Dropout on the tokens after the position embedding (default `dropout`; pos_drop_rate). */
  embedDropout?: number;
  /** Stochastic depth of the last block, rising linearly from 0 at the first (default 0; drop_path_rate). */
  dropPath?: number;
}

const DECODER_KEYS: KeySpec<ViTDecoderConfig> = { imgSize: true, patchSize: true, inChannels: true, dModel: true, numHeads: true, dFF: true,
  depth: true, dropout: true, eps: true, activation: true, seed: true, device: true, precision: true };
const VIT_KEYS: KeySpec<ViTConfig> = { ...DECODER_KEYS, classToken: true, noEmbedClass: true, finalNorm: true, headDim: true, qkvBias: true,
  projBias: true, mlpBias: true, initValues: true, attnDropout: true, projDropout: true, hiddenDropout: true, embedDropout: true, dropPath: true };

/** Options of ViTEncoder.forward (and ViTClassifier.forward). */
export interface ViTForwardOptions {
  /** Keep each block's attention weights in `blocks[i].lastWeights`. */
  needWeights?: boolean;
}
const VIT_FORWARD_OPTIONS = new OptionKeys<ViTForwardOptions>('ViTEncoder.forward options', { needWeights: true });

/** Checks the config fields ViTEncoder and ViTDecoder share (keys checked already), with defaults. */
function decoderConfig(c: ViTDecoderConfig) {
  const imgSize = c.imgSize ?? 32;
  const hw = imageHW('config.imgSize', imgSize);
  const config = {
    imgSize: typeof imgSize === 'number' ? imgSize : hw,
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
  checkPatchGrid(hw, config.patchSize);
  return config;
}

/** Checks a ViTEncoder config (keys checked already), with defaults. */
function vitConfig(c: ViTConfig) {
  const base = decoderConfig(c);
  const projBias = bool('config.projBias', c.projBias ?? true);
  return {
    ...base,
    classToken: bool('config.classToken', c.classToken ?? true),
    noEmbedClass: bool('config.noEmbedClass', c.noEmbedClass ?? false),
    finalNorm: bool('config.finalNorm', c.finalNorm ?? true),
    headDim: headDimOf(base.dModel, base.numHeads, c.headDim),
    qkvBias: bool('config.qkvBias', c.qkvBias ?? true),
    projBias,
    mlpBias: bool('config.mlpBias', c.mlpBias ?? projBias),
    initValues: c.initValues === undefined || c.initValues === 0 ? 0 : positive('config.initValues', c.initValues),
    attnDropout: probability('config.attnDropout', c.attnDropout ?? base.dropout),
    projDropout: probability('config.projDropout', c.projDropout ?? base.dropout),
    hiddenDropout: probability('config.hiddenDropout', c.hiddenDropout ?? base.dropout),
    embedDropout: probability('config.embedDropout', c.embedDropout ?? base.dropout),
    dropPath: probability('config.dropPath', c.dropPath ?? 0),
  };
}

/** The image [height, width] of a checked config. */
function imageSize(c: { imgSize: number | readonly [number, number] }): [number, number] {
  return typeof c.imgSize === 'number' ? [c.imgSize, c.imgSize] : [c.imgSize[0], c.imgSize[1]];
}

/**
 * The arguments of block i of a ViT encoder or decoder; drop path rises linearly over the blocks
 * (timm's torch.linspace(0, drop_path_rate, depth), in float32 as there).
 */
function blockArgs(c: ReturnType<typeof decoderConfig> & Partial<ReturnType<typeof vitConfig>>, seed: number, i: number) {
  const dropPath = c.dropPath && c.depth > 1 ? Math.fround((c.dropPath * i) / (c.depth - 1)) : 0;
  return { dModel: c.dModel, numHeads: c.numHeads, dFF: c.dFF, normFirst: true, activation: c.activation, dropout: c.dropout, eps: c.eps,
    attnDropout: c.attnDropout, projDropout: c.projDropout, hiddenDropout: c.hiddenDropout, dropPath, headDim: c.headDim, qkvBias: c.qkvBias,
    projBias: c.projBias, mlpBias: c.mlpBias, initValues: c.initValues, seed };
}

/** ViTClassifier's pooling (the encoder builds its final norm from it: before pooling, or as fc_norm after). */
interface HeadSettings {
  globalPool: GlobalPool;
  fcNorm: boolean;
}

/**
 * The ViT encoder: patch embedding, optional class token, learned positions, pre-LN blocks, final
 * norm: images [B, C, H, W] → tokens [B, T, D] with T = N (+1 with the class token). Parameter
 * names are timm's: patch_embed.proj.*, cls_token [1, 1, D], pos_embed [1, N(+1), D], blocks.{i}.*
 * (ls1.gamma, ls2.gamma with LayerScale), norm.*.
 */
export class ViTEncoder extends Module {
  readonly config: ReturnType<typeof vitConfig>;
  readonly patch_embed: PatchEmbedding;
  /** The class token (null with classToken false). */
  readonly cls_token: Parameter | null;
  readonly pos_embed: Parameter;
  readonly blocks: EncoderBlock[];
  /** The final norm on every token (null with finalNorm false or when ViTClassifier's fc_norm replaces it). */
  readonly norm: LayerNorm | null;
  private readonly drop: DropoutSite;
  private batch = 0;
  /** The keys of this class's config (a subclass adds its own). */
  protected static readonly configKeys: OptionKeys<ViTConfig> = new OptionKeys<ViTConfig>('ViTEncoder config', VIT_KEYS);
  /** The ops it runs (Module.ops): the token start (lib/models/vit_tokens.ts) and the embedding dropout. */
  static override readonly ops: readonly OpName[] = ['clsPosForward', 'clsPosBackward', 'embeddingForward', 'embeddingBackward', 'copyRows',
    'dropoutForward', 'dropoutBackward'];

  /** The pooling settings of `config` (none: the encoder returns every token). */
  protected static headSettings(_config: ViTClassifierConfig, _classToken: boolean): HeadSettings | null {
    return null;
  }

  constructor(config: ViTConfig = {}) {
    super();
    const cls = new.target as typeof ViTEncoder;
    const checked = cls.configKeys.check('config', config, `${cls.name} config`);
    const c = (this.config = vitConfig(checked));
    const head = cls.headSettings(checked, c.classToken);
    this.placeOn(config);
    const rng = new Random(c.seed);
    this.patch_embed = this.addModule('patch_embed', new PatchEmbedding({ imgSize: c.imgSize, patchSize: c.patchSize,
      inChannels: c.inChannels, dModel: c.dModel, seed: rng.seed() }));
    const n = this.patch_embed.numPatches, prefix = c.classToken ? 1 : 0;
    const clsValues = rng.normalArray(c.dModel, 0.02);
    this.cls_token = c.classToken ? this.addParameter('cls_token', [1, 1, c.dModel], clsValues) : null;
    const rows = c.noEmbedClass ? n : n + prefix;
    this.pos_embed = this.addParameter('pos_embed', [1, rows, c.dModel], rng.normalArray(rows * c.dModel, 0.02));
    this.blocks = Array.from({ length: c.depth }, (_, i) => this.addModule(`blocks.${i}`, new EncoderBlock(blockArgs(c, rng.seed(), i))));
    this.norm = c.finalNorm && !head?.fcNorm ? this.addModule('norm', new LayerNorm({ dModel: c.dModel, eps: c.eps })) : null;
    this.drop = new DropoutSite(c.embedDropout, this.addRng('drop', new Random(rng.seed())));
  }

  /** The image [height, width] the model takes (config.imgSize). */
  get imageSize(): [number, number] {
    return imageSize(this.config);
  }

  /** Tokens per image: patches, plus the class token. */
  get numTokens(): number {
    return this.patch_embed.numPatches + (this.cls_token ? 1 : 0);
  }

  /** images [B, C, H, W] (imgSize) → tokens [B, T, D] (token 0 is the class token when there is one). */
  *forwardProgram(images: Tensor, options: ViTForwardOptions = {}): Program<Tensor<'float32'>> {
    const C = this.config.inChannels, [H, W] = this.imageSize;
    const x = nonEmpty('images', checkTensor('images', images, 'float32', [null, C, H, W]), { 0: 'a batch' });
    options = VIT_FORWARD_OPTIONS.check('options', options, `${this.constructor.name}.forward options`);
    const B = x.shape[0], keep = this.activations;
    keep.close();
    let h = yield* startTokens(this.config, yield* this.patch_embed.forwardOps(x), this.cls_token, this.pos_embed);
    yield* this.drop.forwardInPlace(h, this.training);
    for (const blk of this.blocks) {
      h = yield* blk.forwardOps(keep.add(h), { needWeights: options.needWeights });
      this.dropActivations();
    }
    this.batch = B;
    if (!this.norm) return h;
    return yield* this.norm.forwardOps(keep.add(h));
  }

  /** d(tokens) [B, T, D] → d(images); accumulates the parameter gradients. */
  *backwardProgram(dy: Tensor): Program<Tensor<'float32'>> {
    const B = requireSaved(this.batch || null, 'ViTEncoder'), D = this.config.dModel;
    const dt = checkActivation('dy', dy, [B, this.numTokens, D]);
    const tmp = new Scope();
    let d = this.norm ? tmp.add(yield* this.norm.backwardOps(dt)) : dt;
    for (let i = this.blocks.length - 1; i >= 0; i--) d = tmp.replace(d, yield* this.blocks[i].backwardOps(d));
    d = tmp.replace(d, yield* this.drop.backward(d));
    const dpatches = tmp.replace(d, yield* startTokensBackward(this.config, d, this.cls_token, this.pos_embed));
    const dimages = yield* this.patch_embed.backwardOps(dpatches);
    tmp.close();
    return dimages;
  }

  /** The attention weights [B, H, T, T] of every block for `images` (a forward in eval semantics). */
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

/**
 * The average pool's weights over the T tokens, owned by `scope`: 0 for the leading T − N (class
 * token; an exact zero in the sum), 1 for the N patches (the GEMM's alpha is 1/N).
 */
function poolWeights(T: number, N: number, device: Device, scope: Scope): Storage<'float32'> {
  return scope.add(Tensor.from(new Float32Array(T).fill(1, T - N), [T], device)).storage;
}

/** ViTClassifier's pooling of the tokens: the class token, or the mean of the patch tokens (timm's global_pool). */
export type GlobalPool = 'token' | 'avg';
const GLOBAL_POOLS: readonly GlobalPool[] = ['token', 'avg'];

export interface ViTClassifierConfig extends ViTConfig {
  /** Classes (default 10). */
  numClasses?: number;
  /** 'token' (the class token, default with one) or 'avg' (the mean of the patch tokens, default without; global_pool). */
  globalPool?: GlobalPool;
  /** The final norm after pooling, as fc_norm, instead of on every token (default: globalPool is 'avg'; fc_norm). */
  fcNorm?: boolean;
}

/**
 * ViT classifier: logits = head(fc_norm(pool(encoder(images)))), pool = the class token or the
 * mean of the patch tokens; parameters as ViTEncoder plus fc_norm.* (with fcNorm) and head.*
 * [classes, D].
 */
export class ViTClassifier extends ViTEncoder {
  /** The ops it runs (Module.ops). */
  static override readonly ops: readonly OpName[] = ['copyRows', 'gemm'];
  declare config: ViTEncoder['config'] & HeadSettings & { numClasses: number };
  /** The final norm after pooling (null unless fcNorm). */
  readonly fc_norm: LayerNorm | null;
  private classifier: Linear;
  protected static override readonly configKeys: OptionKeys<ViTConfig> =
    new OptionKeys<ViTClassifierConfig>('ViTClassifier config', { ...VIT_KEYS, numClasses: true, globalPool: true, fcNorm: true });

  protected static override headSettings(config: ViTClassifierConfig, classToken: boolean): HeadSettings {
    const globalPool = oneOf('config.globalPool', config.globalPool ?? (classToken ? 'token' : 'avg'), GLOBAL_POOLS);
    if (globalPool === 'token' && !classToken) invalidArg('config.globalPool', "'avg' without a class token", globalPool);
    return { globalPool, fcNorm: bool('config.fcNorm', config.fcNorm ?? globalPool === 'avg') };
  }

  constructor(config: ViTClassifierConfig = {}) {
    super(config);
    const numClasses = positiveInt('config.numClasses', config.numClasses ?? 10);
    const head = ViTClassifier.headSettings(config, this.config.classToken);
    this.config = { ...this.config, ...head, numClasses };
    const D = this.config.dModel;
    this.fc_norm = this.config.finalNorm && head.fcNorm ? this.addModule('fc_norm', new LayerNorm({ dModel: D, eps: this.config.eps })) : null;
    this.classifier = this.addModule('head', new Linear({ inFeatures: D, outFeatures: numClasses, seed: new Random(this.config.seed + 1).seed() }));
  }

  /** The classification head, Linear(dModel → numClasses): parameters head.weight, head.bias. */
  get head(): Linear {
    return this.classifier;
  }

  /** The number of classes (config.numClasses). */
  get numClasses(): number {
    return this.config.numClasses;
  }

  /**
   * Replaces the head with a new one for `numClasses` classes (timm's reset_classifier), initialised
   * as a new model's from `seed` (default: config.seed + 1), on the model's device; the old head is
   * disposed and config.numClasses follows (saveModel writes the new config). Make the optimizer
   * after this: one made before holds the old head's parameters. Returns this.
   */
  resetClassifier(numClasses: number, options: { seed?: number } = {}): this {
    const n = positiveInt('numClasses', numClasses);
    const seed = objectArg('options', options).seed ?? new Random(this.config.seed + 1).seed();
    if (!Number.isInteger(seed)) invalidArg('options.seed', 'an integer', seed);
    this.checkIdle('resetClassifier');
    this.classifier.dispose();
    this.config = { ...this.config, numClasses: n };
    this.classifier = this.addModule('head', new Linear({ inFeatures: this.config.dModel, outFeatures: n, seed }));
    return this;
  }

  /** images [B, C, H, W] → logits [B, numClasses]. */
  override *forwardProgram(images: Tensor, options: ViTForwardOptions = {}): Program<Tensor<'float32'>> {
    const tokens = yield* super.forwardProgram(images, options);
    const [B, T, D] = tokens.shape, keep = this.activations;
    let pooled: Tensor<'float32'>;
    if (this.config.globalPool === 'token') {
      pooled = keep.add(Tensor.empty([B, D], tokens.dtype as 'float32', tokens.device));
      yield* op('copyRows', { rows: B, cols: D, dst: pooled.storage, dstStride: D, src: tokens.storage, srcStride: T * D });
    } else {
      // pooled[b] = (1/N) Σ_n tokens[b, prefix + n]: per image, the weights [1, T] times the tokens [T, D]
      // (in float32: the gemm op has no bf16 kernel; bfloat16 tokens are converted first).
      const N = this.patch_embed.numPatches, t32 = tokens.cast('float32');
      pooled = keep.add(Tensor.empty([B, D], 'float32', tokens.device));
      yield* op('gemm', { M: 1, N: D, K: T, batch: B, lda: T, strideA: 0, ldb: D, strideB: T * D, ldc: D, strideC: D, alpha: 1 / N,
        A: poolWeights(T, N, tokens.device, keep), B: t32.storage, C: pooled.storage });
      if (t32 !== tokens) t32.recycle();
    }
    tokens.recycle();
    if (this.fc_norm) pooled = keep.add(yield* this.fc_norm.forwardOps(pooled));
    return yield* this.head.forwardOps(pooled);
  }

  /** dLogits [B, numClasses] → d(images); accumulates the parameter gradients. */
  override *backwardProgram(dLogits: Tensor): Program<Tensor<'float32'>> {
    const tmp = new Scope();
    let dp = tmp.add(yield* this.head.backwardOps(dLogits));
    if (this.fc_norm) dp = tmp.replace(dp, yield* this.fc_norm.backwardOps(dp));
    const [B, D] = dp.shape, T = this.numTokens, N = this.patch_embed.numPatches, token = this.config.globalPool === 'token';
    if (!token) dp = tmp.replace(dp, dp.cast('float32'));  // (the gemm below runs in float32)
    const dtokens = tmp.add(Tensor.zeros([B, T, D], dp.dtype as 'float32', dp.device));
    if (token) {
      yield* op('copyRows', { rows: B, cols: D, dst: dtokens.storage, dstStride: T * D, src: dp.storage, srcStride: D });
    } else {
      // dtokens[b, prefix + n] = dp[b] / N: per image, the weights [T, 1] times dp[b] [1, D].
      yield* op('gemm', { M: T, N: D, K: 1, batch: B, lda: 1, strideA: 0, ldb: D, strideB: D, ldc: D, strideC: T * D, alpha: 1 / N,
        A: poolWeights(T, N, dp.device, tmp), B: dp.storage, C: dtokens.storage });
    }
    tmp.free(dp);
    const dimages = yield* super.backwardProgram(dtokens);
    tmp.close();
    return dimages;
  }
}
registerModelClass(ViTClassifier);

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
  const src = x.hostValues(), dst = out.data;
  let i = 0;
  for (let b = 0; b < B; b++)
    for (let gy = 0; gy < gh; gy++)
      for (let gx = 0; gx < gw; gx++)
        for (let py = 0; py < P; py++)
          for (let px = 0; px < P; px++)
            for (let c = 0; c < C; c++) dst[i++] = src[((b * C + c) * H + gy * P + py) * W + gx * P + px];
  return out.moveTo(x.device);
}

/** The inverse of patchify for square images: [B, N, P·P·C] → [B, C, imgSize, imgSize], on the patches' device. */
export function unpatchify(patches: Tensor, imgSize: number, patchSize: number, channels: number): Tensor<'float32'> {
  const P = positiveInt('patchSize', patchSize), S = positiveInt('imgSize', imgSize), C = positiveInt('channels', channels);
  if (S % P) invalidArg('patchSize', `a divisor of imgSize (${S})`, P);
  const g = S / P;
  const x = checkTensor('patches', patches, 'float32', [null, g * g, P * P * C]);
  const B = x.shape[0], out = Tensor.empty([B, C, S, S]);
  const src = x.hostValues(), dst = out.data;
  let i = 0;
  for (let b = 0; b < B; b++)
    for (let gy = 0; gy < g; gy++)
      for (let gx = 0; gx < g; gx++)
        for (let py = 0; py < P; py++)
          for (let px = 0; px < P; px++)
            for (let c = 0; c < C; c++) dst[((b * C + c) * S + gy * P + py) * S + gx * P + px] = src[i++];
  return out.moveTo(x.device);
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

const VIT_DECODER_CONFIG = new OptionKeys<ViTDecoderConfig>('ViTDecoder config', DECODER_KEYS);
const VIT_DECODER_OPTIONS = new OptionKeys<ViTDecoderOptions>('ViTDecoder.forward options',
  { causal: true, attnMask: true, keyPaddingMask: true, memoryKeyPaddingMask: true });

/**
 * ViT decoder: every patch position starts from mask_token + pos_embed, pre-LN DecoderBlocks
 * cross-attend to the encoder output `memory`, then norm and pred map tokens to patch pixels.
 * Parameters: mask_token [1, 1, D], pos_embed [1, N, D], blocks.{i}.*, norm.*, pred.* [P·P·C, D].
 */
export class ViTDecoder extends Module {
  /** The ops it runs (Module.ops). */
  static override readonly ops: readonly OpName[] = ['embeddingForward', 'embeddingBackward', 'tokenPosForward', 'tokenPosBackward', 'copyRows', 'dropoutForward', 'dropoutBackward'];
  readonly config: ReturnType<typeof decoderConfig>;
  readonly numPatches: number;
  readonly mask_token: Parameter;
  readonly pos_embed: Parameter;
  readonly blocks: DecoderBlock[];
  readonly norm: LayerNorm;
  readonly pred: Linear;
  /** The normalised tokens [B, N, D] of the last forward (the reference's first output); freed by the next forward. */
  tokens: Tensor<'float32'> | null = null;
  private batch = 0;

  constructor(config: ViTDecoderConfig = {}) {
    super();
    const c = (this.config = decoderConfig(VIT_DECODER_CONFIG.check('config', config)));
    this.placeOn(config);
    const rng = new Random(c.seed);
    const [gh, gw] = checkPatchGrid(imageSize(c), c.patchSize);
    const n = (this.numPatches = gh * gw);
    this.mask_token = this.addParameter('mask_token', [1, 1, c.dModel], new Float32Array(c.dModel));
    this.pos_embed = this.addParameter('pos_embed', [1, n, c.dModel], rng.normalArray(n * c.dModel, 0.02));
    this.blocks = Array.from({ length: c.depth }, (_, i) => this.addModule(`blocks.${i}`, new DecoderBlock(blockArgs(c, rng.seed(), i))));
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
    this.tokens = keep.addExposed(yield* this.norm.forwardOps(keep.add(h)));
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
    const r = yield* decoderStackBackward(this.blocks, tmp.replace(dt, yield* this.norm.backwardOps(dt)), tmp);
    yield* this.tokenPos(r.dx, true);
    tmp.close();
    return r.dMemory;
  }

  /**
   * The decoder's start, h [B, N, D] = mask_token + pos_embed (mask_token.expand(B, N, -1) +
   * pos_embed), or with `backward` its gradient from d = `h`: mask_token.grad += Σ_{b,n} d,
   * pos_embed.grad += Σ_b d: the tokenPos ops, on every device.
   */
  private *tokenPos(h: Tensor<'float32'>, backward = false): Program<void> {
    const [B, N, D] = h.shape;
    if (!backward) return yield* op('tokenPosForward', { B, N, D, out: h.storage, token: this.mask_token.storage, pos: this.pos_embed.storage });
    const d = h.cast('float32'); // (no bf16 kernel: a bfloat16 gradient, precision 'bf16', is converted)
    yield* op('tokenPosBackward', { B, N, D, dtoken: this.mask_token.gradData(), dpos: this.pos_embed.gradData(), dout: d.storage });
    if (d !== h) d.dispose();
  }
}
registerModelClass(ViTDecoder);
