import { invalidArg } from '../validation/errors';
import { uniformFanIn } from '../core/init';
import { requireSaved, Module, Parameter } from '../core/module';
import { OptionKeys } from '../validation/options';
import { registerModelClass } from '../io/persist';
import { op, type OpName, type Program } from '../core/program';
import { Random } from '../core/random';
import { Scope } from '../core/scope';
import { checkActivation, checkTensor, Tensor } from '../core/tensor';
import type { PlacementConfig } from '../core/device';
import { nonEmpty, positiveInt, seedOf, type Settings } from '../validation/values';

/** An image size: one number for square images, or [height, width]. */
export type ImageSize = number | readonly [number, number];

/** Checks an image size `name` and returns it as [height, width]. */
export function imageHW(name: string, v: unknown): [number, number] {
  if (Array.isArray(v) && v.length === 2) return [positiveInt(`${name}[0]`, v[0]), positiveInt(`${name}[1]`, v[1])];
  if (typeof v !== 'number') invalidArg(name, 'a positive integer or [height, width]', v);
  const s = positiveInt(name, v);
  return [s, s];
}

/** Checks that `patchSize` divides both sides of `hw` (the image size named imgSize). */
export function checkPatchGrid(hw: readonly [number, number], patchSize: number): [number, number] {
  if (hw[0] % patchSize !== 0 || hw[1] % patchSize !== 0)
    invalidArg('config.patchSize', `a divisor of the image height and width (${hw[0]} × ${hw[1]})`, patchSize);
  return [hw[0] / patchSize, hw[1] / patchSize];
}

export interface PatchEmbeddingConfig extends PlacementConfig {
  /** Image size: square side, or [height, width]. */
  imgSize: ImageSize;
  patchSize: number;
  inChannels: number;
  dModel: number;
  seed?: number;
}

const PATCH_EMBEDDING_CONFIG = new OptionKeys<PatchEmbeddingConfig>('PatchEmbedding config',
  { imgSize: true, patchSize: true, inChannels: true, dModel: true, seed: true, device: true, precision: true });

/**
 * A patchSize × patchSize convolution with stride patchSize, flattened to tokens: images
 * [B, C, H, W] (NCHW) → [B, N, D] with N = (H/P)(W/P) in row-major patch order.
 * Parameters: proj.weight [D, C, P, P], proj.bias [D] (torch.nn.Conv2d's layout and initialisation).
 */
export class PatchEmbedding extends Module {
  /** The ops it runs (Module.ops). */
  static override readonly ops: readonly OpName[] = ['patchEmbedForward', 'patchEmbedBackward'];
  readonly config: Settings<PatchEmbeddingConfig>;
  readonly weight: Parameter;
  readonly bias: Parameter;
  /** Patches per image at imgSize. */
  readonly numPatches: number;
  /** Patch rows and columns at imgSize. */
  readonly gridSize: readonly [number, number];
  private saved: { images: Tensor<'float32'>; dims: { B: number; C: number; H: number; W: number; P: number; D: number };
    dtype: 'float32' } | null = null;

  constructor(config: PatchEmbeddingConfig) {
    super();
    config = PATCH_EMBEDDING_CONFIG.check('config', config);
    this.placeOn(config);
    const hw = imageHW('config.imgSize', config.imgSize);
    const patchSize = positiveInt('config.patchSize', config.patchSize);
    const inChannels = positiveInt('config.inChannels', config.inChannels);
    const dModel = positiveInt('config.dModel', config.dModel);
    this.gridSize = checkPatchGrid(hw, patchSize);
    const imgSize = typeof config.imgSize === 'number' ? config.imgSize : hw;
    this.config = { imgSize, patchSize, inChannels, dModel, seed: seedOf(config.seed ?? 0) };
    this.numPatches = this.gridSize[0] * this.gridSize[1];
    const rng = new Random(this.config.seed);
    const fanIn = inChannels * patchSize * patchSize;
    this.weight = this.addParameter('proj.weight', [dModel, inChannels, patchSize, patchSize], uniformFanIn(rng, dModel * fanIn, fanIn));
    this.bias = this.addParameter('proj.bias', [dModel], uniformFanIn(rng, dModel, fanIn));
  }

  /** images [B, C, H, W] → tokens [B, N, D]; H and W must be multiples of patchSize. */
  *forwardProgram(images: Tensor): Program<Tensor<'float32'>> {
    const { inChannels: C, patchSize: P, dModel: D } = this.config;
    const x = nonEmpty('images', checkTensor('images', images, 'float32', [null, C, null, null]), { 2: 'a height', 3: 'a width' });
    const [B, , H, W] = x.shape;
    if (H % P !== 0 || W % P !== 0)
      invalidArg('images', `a float32 Tensor [B, ${C}, H, W] with H and W multiples of the patch size ${P}`, x);
    // Under precision 'bf16' on 'cuda' the tokens are bfloat16 (the images stay float32) and the product reads the weight's bf16 copy.
    const dt = this.activationDType as 'float32';
    const out = Tensor.empty([B, (H / P) * (W / P), D], dt, x.device);
    const dims = { B, C, H, W, P, D, precision: this.precision };
    yield* op('patchEmbedForward', { ...dims, out: out.storage, images: x.storage, weight: this.weight.storageFor(dt), bias: this.bias.storage,
      biasRounded: this.roundedBias(this.bias, dt) });
    this.saved = { images: x, dims, dtype: dt };
    return out;
  }

  /** dy [B, N, D] → d(images) [B, C, H, W]; accumulates proj.weight.grad and proj.bias.grad. */
  *backwardProgram(dy: Tensor): Program<Tensor<'float32'>> {
    const s = requireSaved(this.saved, 'PatchEmbedding');
    const { B, H, W, P, D } = s.dims;
    checkActivation('dy', dy, [B, (H / P) * (W / P), D]);
    const tmp = new Scope(dy), dyt = tmp.add(dy.cast(s.dtype));
    const dimages = Tensor.empty(s.images.shape, 'float32', s.images.device);
    yield* op('patchEmbedBackward', { ...s.dims, dimages: dimages.storage, dweight: this.weight.gradData(),
      dbias: this.bias.gradData(), dout: dyt.storage, images: s.images.storage, weight: this.weight.storageFor(s.dtype) });
    tmp.close();
    return dimages;
  }
}
registerModelClass(PatchEmbedding);
