/**
 * The image transforms of ImageFolder, as torchvision defines them, in plain arithmetic (no
 * decoding: lib/data/decode.ts applies the boxes with sharp): the random resized crop's box, the
 * eval transform's resize and centre crop, the per-sample seeds that make augmentation
 * deterministic, and the normalisation of RGB bytes into a CHW float32 image. Nothing here loads
 * the addon, so worker threads can import it.
 */
import { invalidArg } from '../validation/errors';
import { OptionKeys } from '../validation/options';

/** ImageNet's per-channel mean of RGB values in [0, 1] (torchvision's normalisation). */
export const IMAGENET_MEAN: readonly [number, number, number] = [0.485, 0.456, 0.406];
/** ImageNet's per-channel standard deviation. */
export const IMAGENET_STD: readonly [number, number, number] = [0.229, 0.224, 0.225];

/** Options of ImageFolder's transform: 'train' or 'eval' with their settings changed. */
export interface TransformOptions {
  /**
   * 'train': RandomResizedCrop(imageSize, scale, ratio) then a horizontal flip with probability
   * `flip`; 'eval': resize the shorter side to imageSize / cropFraction, then CenterCrop(imageSize).
   */
  mode: 'train' | 'eval';
  /** Train: the range of the crop's area as a fraction of the image's (default [0.08, 1]). */
  scale?: readonly [number, number];
  /** Train: the range of the crop's aspect ratio, width / height (default [3/4, 4/3]). */
  ratio?: readonly [number, number];
  /** Train: probability of a horizontal flip (default 0.5). */
  flip?: number;
  /** Eval: the centre crop's side as a fraction of the resized shorter side (default 0.875, i.e. 224 of 256). */
  cropFraction?: number;
}
const TRANSFORM_OPTIONS = new OptionKeys<TransformOptions>('ImageFolder transform options', {
  mode: true, scale: true, ratio: true, flip: true, cropFraction: true,
});

/** A transform with every setting filled in, and the output size and normalisation: what a worker needs. */
export interface ImageTransform {
  mode: 'train' | 'eval';
  scale: [number, number];
  ratio: [number, number];
  flip: number;
  cropFraction: number;
  /** Side of the square output image. */
  imageSize: number;
  mean: [number, number, number];
  std: [number, number, number];
}

/** A box in pixels of the source image. */
export interface Box {
  left: number;
  top: number;
  width: number;
  height: number;
}

function range(name: string, v: unknown, lo: number, hi: number): [number, number] {
  const ok = Array.isArray(v) && v.length === 2 && v.every((x) => typeof x === 'number' && Number.isFinite(x)) &&
    v[0] > lo && v[0] <= v[1] && v[1] <= hi;
  if (!ok) invalidArg(name, `two numbers [low, high] with ${lo} < low <= high <= ${hi}`, v);
  return [v[0], v[1]];
}

function triple(name: string, v: unknown, positive: boolean): [number, number, number] {
  const ok = Array.isArray(v) && v.length === 3 && v.every((x) => typeof x === 'number' && Number.isFinite(x) && (!positive || x > 0));
  if (!ok) invalidArg(name, `three finite${positive ? ' positive' : ''} numbers (R, G, B)`, v);
  return [v[0], v[1], v[2]];
}

/** Checks and completes a transform ('train', 'eval' or TransformOptions) with the output size and normalisation. */
export function resolveTransform(
  transform: 'train' | 'eval' | TransformOptions, imageSize: number, mean: unknown, std: unknown,
): ImageTransform {
  const o = typeof transform === 'string' ? { mode: transform } : TRANSFORM_OPTIONS.check('transform', transform);
  if (o.mode !== 'train' && o.mode !== 'eval') invalidArg('transform.mode', "'train' | 'eval'", o.mode);
  const flip = o.flip ?? 0.5, cropFraction = o.cropFraction ?? 0.875;
  if (typeof flip !== 'number' || !(flip >= 0 && flip <= 1)) invalidArg('transform.flip', 'a probability in [0, 1]', flip);
  if (typeof cropFraction !== 'number' || !(cropFraction > 0 && cropFraction <= 1))
    invalidArg('transform.cropFraction', 'a number in (0, 1]', cropFraction);
  return {
    mode: o.mode,
    scale: range('transform.scale', o.scale ?? [0.08, 1], 0, 1),
    ratio: range('transform.ratio', o.ratio ?? [3 / 4, 4 / 3], 0, Infinity),
    flip, cropFraction, imageSize,
    mean: triple('mean', mean ?? IMAGENET_MEAN, false),
    std: triple('std', std ?? IMAGENET_STD, true),
  };
}

/** Python's round(): halves go to the even neighbour (torchvision's boxes use it). */
export function roundHalfEven(x: number): number {
  const r = Math.round(x);
  return r - x === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/**
 * torchvision's RandomResizedCrop.get_params: up to ten tries of an area fraction uniform in
 * `scale` and a log-uniform aspect ratio in `ratio`, placed uniformly; when none fits, the
 * largest centred box with the ratio clamped to `ratio`.
 */
export function randomResizedCropBox(width: number, height: number, t: ImageTransform, rng: () => number): Box {
  const area = width * height, [lr0, lr1] = [Math.log(t.ratio[0]), Math.log(t.ratio[1])];
  for (let attempt = 0; attempt < 10; attempt++) {
    const target = area * (t.scale[0] + (t.scale[1] - t.scale[0]) * rng());
    const aspect = Math.exp(lr0 + (lr1 - lr0) * rng());
    const w = roundHalfEven(Math.sqrt(target * aspect)), h = roundHalfEven(Math.sqrt(target / aspect));
    if (w > 0 && w <= width && h > 0 && h <= height)
      return { top: Math.floor(rng() * (height - h + 1)), left: Math.floor(rng() * (width - w + 1)), width: w, height: h };
  }
  const inRatio = width / height;
  let w = width, h = height;
  if (inRatio < t.ratio[0]) h = roundHalfEven(w / t.ratio[0]);
  else if (inRatio > t.ratio[1]) w = roundHalfEven(h * t.ratio[1]);
  return { top: Math.floor((height - h) / 2), left: Math.floor((width - w) / 2), width: w, height: h };
}

/**
 * The eval transform's geometry (torchvision's Resize(int(size / cropFraction)) then
 * CenterCrop(size)): the size to resize to, shorter side first fixed, and the crop in it.
 */
export function evalGeometry(width: number, height: number, t: ImageTransform): { resize: { width: number; height: number }; crop: Box } {
  const short = Math.trunc(t.imageSize / t.cropFraction);
  const resize = width <= height
    ? { width: short, height: Math.trunc((short * height) / width) }
    : { width: Math.trunc((short * width) / height), height: short };
  const size = t.imageSize;
  return { resize, crop: { top: roundHalfEven((resize.height - size) / 2), left: roundHalfEven((resize.width - size) / 2), width: size, height: size } };
}

function mix32(x: number): number {
  x = Math.imul(x ^ (x >>> 16), 0x85ebca6b);
  x = Math.imul(x ^ (x >>> 13), 0xc2b2ae35);
  return (x ^ (x >>> 16)) >>> 0;
}

/** The seed of one sample's augmentation in one epoch: the same on every worker and run. */
export function sampleSeed(seed: number, epoch: number, index: number): number {
  const hi = Math.floor(seed / 4294967296);
  return mix32(mix32(mix32((seed >>> 0) ^ mix32(hi + 0x632be5ab)) ^ epoch) + index);
}

/**
 * Writes an interleaved RGB image (size × size × 3 bytes) into `out` at `offset` as planes
 * [3, size, size] of (value / 255 - mean[c]) / std[c].
 */
export function normalizeInto(rgb: Uint8Array, t: ImageTransform, out: Float32Array, offset: number): void {
  const plane = t.imageSize * t.imageSize;
  if (rgb.length !== 3 * plane) invalidArg('rgb', `${3 * plane} bytes (${t.imageSize}×${t.imageSize} RGB)`, rgb);
  for (let c = 0; c < 3; c++) {
    const lut = new Float32Array(256);
    for (let v = 0; v < 256; v++) lut[v] = (v / 255 - t.mean[c]) / t.std[c];
    const o = offset + c * plane;
    for (let i = 0; i < plane; i++) out[o + i] = lut[rgb[3 * i + c]];
  }
}
