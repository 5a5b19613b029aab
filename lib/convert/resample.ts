/**
 * Position-embedding resampling for a new image size, as timm's resample_abs_pos_embed: the grid
 * part of pos_embed [1, prefix + h·w, D] is interpolated bicubically (torch.nn.functional.interpolate,
 * align_corners=False, with or without antialias) to the new grid; the prefix tokens (class token)
 * are kept apart, unchanged. Computed in float64 and rounded to float32 (timm interpolates in
 * float32: the two differ by float32 rounding).
 */
import { invalidArg } from '../validation/errors';
import { bool, positiveInt } from '../validation/values';
import { OptionKeys } from '../validation/options';
import { checkTensor, Tensor } from '../core/tensor';

export interface ResamplePosEmbedOptions {
  /** The new grid [rows, columns] of patches. */
  newSize: readonly [number, number];
  /** The grid of the table given (default: square, from its length). */
  oldSize?: readonly [number, number];
  /** Leading tokens not on the grid (default 1: the class token; 0 for noEmbedClass tables). */
  numPrefixTokens?: number;
  /** torch's antialias (default true, timm's default; it changes both up- and downsampling). */
  antialias?: boolean;
}

const RESAMPLE_OPTIONS = new OptionKeys<ResamplePosEmbedOptions>('resamplePosEmbed options',
  { newSize: true, oldSize: true, numPrefixTokens: true, antialias: true });

/** One output position's taps: input indices and weights. */
type Taps = { index: number[]; weight: number[] };

/** torch's cubic convolution kernel with parameter a (-0.75 in upsample_bicubic2d, -0.5 in its antialiased twin). */
function cubic(x: number, a: number): number {
  x = Math.abs(x);
  if (x < 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return (((x - 5) * x + 8) * x - 4) * a;
  return 0;
}

/** upsample_bicubic2d (align_corners=False): 4 taps around scale·(i + 0.5) − 0.5, indices clamped to the border. */
function bicubicTaps(inSize: number, outSize: number): Taps[] {
  const scale = inSize / outSize;
  return Array.from({ length: outSize }, (_, i) => {
    const real = scale * (i + 0.5) - 0.5, x0 = Math.floor(real), t = real - x0;
    const clamp = (j: number) => Math.min(Math.max(j, 0), inSize - 1);
    return { index: [-1, 0, 1, 2].map((k) => clamp(x0 + k)), weight: [t + 1, t, 1 - t, 2 - t].map((d) => cubic(d, -0.75)) };
  });
}

/** _upsample_bicubic2d_aa: the kernel stretched by the downsampling factor, taps inside the input, weights normalised. */
function antialiasTaps(inSize: number, outSize: number): Taps[] {
  const scale = inSize / outSize, support = scale >= 1 ? 2 * scale : 2, invscale = scale >= 1 ? 1 / scale : 1;
  return Array.from({ length: outSize }, (_, i) => {
    const center = scale * (i + 0.5);
    const xmin = Math.max(Math.trunc(center - support + 0.5), 0), xmax = Math.min(Math.trunc(center + support + 0.5), inSize);
    const index: number[] = [], weight: number[] = [];
    for (let j = xmin; j < xmax; j++) {
      index.push(j);
      weight.push(cubic((j - center + 0.5) * invscale, -0.5));
    }
    const total = weight.reduce((s, w) => s + w, 0);
    return { index, weight: total === 0 ? weight : weight.map((w) => w / total) };
  });
}

/** Checks a grid size [rows, columns]. */
function gridSize(name: string, v: unknown): [number, number] {
  if (!Array.isArray(v) || v.length !== 2) invalidArg(name, '[rows, columns]', v);
  return [positiveInt(`${name}[0]`, v[0]), positiveInt(`${name}[1]`, v[1])];
}

/**
 * pos_embed [1, prefix + oldSize[0]·oldSize[1], D] (a float32 tensor on any device) → a new one
 * [1, prefix + newSize[0]·newSize[1], D] on the same device; a table already of the new size is copied unchanged.
 * Load it in place of a checkpoint's `pos_embed` to fine-tune at another resolution, e.g. a 224²
 * checkpoint (14 × 14 patches) at 384² (24 × 24): `{ newSize: [24, 24] }`.
 */
export function resamplePosEmbed(posEmbed: Tensor, options: ResamplePosEmbedOptions): Tensor<'float32'> {
  const t = checkTensor('posEmbed', posEmbed, 'float32', [1, null, null]);
  const o = RESAMPLE_OPTIONS.check('options', options);
  const prefix = o.numPrefixTokens ?? 1;
  if (!Number.isInteger(prefix) || prefix < 0 || prefix >= t.shape[1]) invalidArg('options.numPrefixTokens', `an integer in [0, ${t.shape[1]})`, prefix);
  const [, L, D] = t.shape, grid = L - prefix;
  const side = Math.round(Math.sqrt(grid));
  const [oh, ow] = o.oldSize === undefined ? [side, side] : gridSize('options.oldSize', o.oldSize);
  if (oh * ow !== grid) invalidArg(o.oldSize === undefined ? 'posEmbed' : 'options.oldSize',
    `a grid of ${grid} positions (${L} tokens less ${prefix} prefix)`, o.oldSize ?? t);
  const [nh, nw] = gridSize('options.newSize', o.newSize);
  const taps = bool('options.antialias', o.antialias ?? true) ? antialiasTaps : bicubicTaps;
  const src = t.hostValues(), out = new Float32Array((prefix + nh * nw) * D);
  out.set(src.subarray(0, prefix * D));
  if (nh === oh && nw === ow) out.set(src.subarray(prefix * D), prefix * D);
  else {
    // Separable, width first as torch: rows [oh, nw, D] in float64, then columns.
    const tw = taps(ow, nw), th = taps(oh, nh), rows = new Float64Array(oh * nw * D);
    for (let y = 0; y < oh; y++)
      for (let x = 0; x < nw; x++)
        for (let k = 0; k < tw[x].index.length; k++) {
          const w = tw[x].weight[k], from = (prefix + y * ow + tw[x].index[k]) * D, to = (y * nw + x) * D;
          for (let c = 0; c < D; c++) rows[to + c] += w * src[from + c];
        }
    const acc = new Float64Array(D);
    for (let y = 0; y < nh; y++)
      for (let x = 0; x < nw; x++) {
        acc.fill(0);
        for (let k = 0; k < th[y].index.length; k++) {
          const w = th[y].weight[k], from = (th[y].index[k] * nw + x) * D;
          for (let c = 0; c < D; c++) acc[c] += w * rows[from + c];
        }
        out.set(acc, (prefix + y * nw + x) * D);
      }
  }
  return Tensor.from(out, [1, prefix + nh * nw, D], t.device);
}
