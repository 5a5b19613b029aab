/**
 * One sample of an image folder: a file decoded by sharp (any format it reads: JPEG, PNG, WebP,
 * AVIF, GIF, TIFF, ...; EXIF orientation applied, alpha dropped, grey expanded to RGB), cropped
 * and resized as the transform says (lib/data/transforms.ts: RandomResizedCrop and a horizontal
 * flip, or resize and centre crop, bilinear), then normalised into CHW float32. Used by the
 * DataLoader's worker threads and by ImageFolder.get; it does not load the addon.
 */
import { readFile } from 'node:fs/promises';

import type sharp from 'sharp';

import { NodeformerError } from '../validation/errors';
import { mulberry32 } from '../core/random';
import { evalGeometry, type ImageTransform, normalizeInto, randomResizedCropBox } from './transforms';

/** The sharp module (loaded by the caller: requireOptional on the main thread, its path in a worker). */
export type Sharp = typeof sharp;

/** The transformed image as interleaved RGB bytes, imageSize × imageSize × 3. */
async function transformedRgb(sharp: Sharp, bytes: Buffer, t: ImageTransform, seed: number): Promise<Buffer> {
  // Rotation, alpha removal and colour conversion only when the file needs them: each is a pass.
  const meta = await sharp(bytes).metadata();
  const rotated = (meta.orientation ?? 1) > 1;
  const { width, height } = rotated ? meta.autoOrient : meta;
  // Decoding aborts on corrupt or truncated data, not on warnings (what many real JPEGs carry).
  let img = sharp(bytes, { autoOrient: rotated, failOn: 'error' });
  if (t.mode === 'train') {
    const rng = mulberry32(seed);
    const box = randomResizedCropBox(width, height, t, rng);
    img = img.extract(box).resize(t.imageSize, t.imageSize, { fit: 'fill', kernel: 'linear' }).flop(rng() < t.flip);
  } else {
    const { resize, crop } = evalGeometry(width, height, t);
    img = img.resize(resize.width, resize.height, { fit: 'fill', kernel: 'linear' }).extract(crop);
  }
  if (meta.hasAlpha) img = img.removeAlpha();
  if (meta.space !== 'srgb' || meta.depth !== 'uchar' || meta.channels !== (meta.hasAlpha ? 4 : 3)) img = img.toColourspace('srgb');
  const { data, info } = await img.raw().toBuffer({ resolveWithObject: true });
  if (info.channels !== 3 || info.width !== t.imageSize || info.height !== t.imageSize || data.length !== 3 * t.imageSize * t.imageSize)
    throw new Error(`sharp returned ${info.width}×${info.height}×${info.channels} (${data.length} bytes) instead of ${t.imageSize}×${t.imageSize}×3 bytes`);
  return data;
}

/**
 * Decodes and transforms `file` into `out` at `offset` (3 × imageSize × imageSize floats); `seed`
 * draws the train transform's crop and flip. A file that cannot be read or decoded is an
 * ERR_NF_FORMAT error naming it.
 */
export async function loadSample(sharp: Sharp, file: string, t: ImageTransform, seed: number, out: Float32Array, offset: number): Promise<void> {
  let rgb: Buffer;
  try {
    rgb = await transformedRgb(sharp, await readFile(file), t, seed);
  } catch (e) {
    throw new NodeformerError('ERR_NF_FORMAT', `Cannot load the image ${file}: ${(e as Error).message}`);
  }
  normalizeInto(rgb, t, out, offset);
}
