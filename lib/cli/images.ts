/**
 * Pictures → a classifier's input: the one preprocessing of `nodeformer predict` and the example
 * server (examples/server), so the same picture gets the same prediction from both.
 *
 * Digits: any PNG (grey, RGB, with or without alpha, any size; decoded here by pngjs, as the
 * server does) or any other format sharp reads (JPEG, WebP, AVIF, GIF, TIFF) becomes a size × size
 * image with pixels in [0, 1], a light digit on a dark background as in MNIST: alpha composited
 * over white paper, inverted when its border is light (a dark digit on paper), padded to a centred
 * square and area-resampled. digitBatch then normalises as the demo's training does.
 *
 * Models trained on an image folder (`train --data`): each picture goes through the eval
 * transform the model was trained with (lib/data: resize, centre crop, normalisation).
 */
import * as fs from 'node:fs';

import { PNG } from 'pngjs';

import { loadSample, type Sharp } from '../data/decode';
import type { ImageTransform } from '../data/transforms';
import { NodeformerError } from '../validation/errors';
import { requireOptional } from '../core/optional';
import { hasPngSignature, PNG_SIGNATURE, readPngHeader } from '../io/png';
import { Tensor } from '../core/tensor';
import { DIGIT_SIZE, MNIST_MEAN, MNIST_STD } from './mnist';
import { UsageError } from './usage';

const hex = (bytes: ArrayLike<number>) => Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join(' ');

/**
 * Width and height from the signature and the IHDR chunk, without decoding. Anything else is
 * ERR_NF_FORMAT naming `source`: "Expected a PNG image for <source> but received 17 bytes that are
 * not a PNG file (...)".
 */
export function pngSize(bytes: Uint8Array, source: string): { width: number; height: number } {
  const header = readPngHeader(bytes);
  if (!header)
    throw new NodeformerError('ERR_NF_FORMAT', `Expected a PNG image for ${source} but received ${bytes.length} bytes that are ` +
      `not a PNG file (they start with ${hex(bytes.subarray(0, 8)) || 'nothing'}; a PNG starts with ${hex(PNG_SIGNATURE)} ` +
      'and an IHDR chunk)');
  return { width: header.width, height: header.height };
}

/** What a pngjs error means, in words a user can act on. */
function decodeFailure(e: Error): string {
  if (/finished stream|end of (input|stream)|unexpected end/i.test(e.message)) return 'the file is truncated (it ends inside the image data)';
  if (/crc/i.test(e.message)) return 'a chunk is corrupt (its CRC does not match)';
  return e.message;
}

/** Decodes PNG bytes to grey levels in [0, 1], alpha composited over white, row-major [height, width]. */
export function decodeGreyPng(bytes: Uint8Array, source: string): { width: number; height: number; grey: Float32Array } {
  pngSize(bytes, source);
  let png: PNG;
  try {
    png = PNG.sync.read(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
  } catch (e) {
    throw new NodeformerError('ERR_NF_FORMAT', `Expected a PNG image for ${source} but it cannot be decoded: ${decodeFailure(e as Error)}`);
  }
  return { width: png.width, height: png.height, grey: greyOverWhite(png.data) };
}

/** RGBA bytes to grey levels in [0, 1], alpha composited over white. */
function greyOverWhite(rgba: Uint8Array): Float32Array {
  const grey = new Float32Array(rgba.length / 4);
  for (let i = 0; i < grey.length; i++) {
    const a = rgba[4 * i + 3] / 255;
    const lum = (0.299 * rgba[4 * i] + 0.587 * rgba[4 * i + 1] + 0.114 * rgba[4 * i + 2]) / 255;
    grey[i] = a * lum + (1 - a);
  }
  return grey;
}

/** Inverts `grey` in place when its border is light on average (a dark digit on paper). */
function lightOnDark(grey: Float32Array, w: number, h: number): void {
  let sum = 0;
  for (let x = 0; x < w; x++) sum += grey[x] + grey[(h - 1) * w + x];
  for (let y = 0; y < h; y++) sum += grey[y * w] + grey[y * w + w - 1];
  if (sum / (2 * (w + h)) > 0.5) for (let i = 0; i < grey.length; i++) grey[i] = 1 - grey[i];
}

/** Pads to a centred square (dark), then averages the source area under each of size × size target pixels. */
function resizeSquare(src: Float32Array, w: number, h: number, size: number): Float32Array {
  const side = Math.max(w, h), ox = Math.floor((side - w) / 2), oy = Math.floor((side - h) / 2), scale = side / size;
  const out = new Float32Array(size * size);
  for (let ty = 0; ty < size; ty++)
    for (let tx = 0; tx < size; tx++) {
      // Target pixel covers [x0, x1) × [y0, y1) of the padded square.
      const x0 = tx * scale, x1 = x0 + scale, y0 = ty * scale, y1 = y0 + scale;
      let sum = 0;
      for (let sy = Math.floor(y0); sy < Math.ceil(y1); sy++) {
        const wy = Math.min(sy + 1, y1) - Math.max(sy, y0), iy = sy - oy;
        if (iy < 0 || iy >= h) continue;
        for (let sx = Math.floor(x0); sx < Math.ceil(x1); sx++) {
          const ix = sx - ox;
          if (ix < 0 || ix >= w) continue;
          sum += src[iy * w + ix] * wy * (Math.min(sx + 1, x1) - Math.max(sx, x0));
        }
      }
      out[ty * size + tx] = sum / (scale * scale);
    }
  return out;
}

/**
 * PNG bytes → a size × size digit in [0, 1], light on dark (see the file's header). Bytes that are
 * not a PNG, or do not decode, are ERR_NF_FORMAT errors naming `source`.
 */
export function digitPixels(bytes: Uint8Array, size: number, source: string): Float32Array {
  const { width, height, grey } = decodeGreyPng(bytes, source);
  return greyDigit(grey, width, height, size);
}

/** Grey levels [height, width] → a size × size digit, light on dark. */
function greyDigit(grey: Float32Array, width: number, height: number, size: number): Float32Array {
  lightOnDark(grey, width, height);
  return width === size && height === size ? grey : resizeSquare(grey, width, height, size);
}

/**
 * Digits (size × size pixels in [0, 1] each, from digitPixels) as the model's input [n, channels,
 * size, size], normalised with MNIST's mean and standard deviation as in training (each channel a copy).
 */
export function digitBatch(digits: Float32Array[], size: number, channels = 1): Tensor<'float32'> {
  const plane = size * size, out = new Float32Array(digits.length * channels * plane);
  digits.forEach((d, b) => {
    for (let c = 0; c < channels; c++)
      for (let i = 0; i < plane; i++) out[(b * channels + c) * plane + i] = (d[i] - MNIST_MEAN) / MNIST_STD;
  });
  return Tensor.from(out, [digits.length, channels, size, size]);
}

/** The bytes of `file`; a missing or unreadable file is a UsageError. */
function readInput(file: string): Buffer {
  try {
    return fs.readFileSync(file);
  } catch (e) {
    throw new UsageError(`Cannot read ${file}: ${(e as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (e as Error).message}`);
  }
}

/** PNG bytes as a 28×28 digit (digitPixels); bytes that are no PNG, or do not decode, are a UsageError. */
function pngDigit(bytes: Uint8Array, file: string): Float32Array {
  try {
    return digitPixels(bytes, DIGIT_SIZE, file);
  } catch (e) {
    if (e instanceof NodeformerError) throw new UsageError(e.message);
    throw e;
  }
}

/** A PNG file as a 28×28 digit (digitPixels); an unreadable file or one that is no PNG is a UsageError. */
export function readDigitPng(file: string): Float32Array {
  return pngDigit(readInput(file), file);
}

const SHARP_FORMATS = 'PNG, JPEG, WebP, AVIF, GIF, TIFF or SVG: a format sharp reads';

function sharpForPredict(): Sharp {
  return requireOptional<Sharp>('sharp', 'nodeformer predict reads images other than PNG with sharp');
}

/**
 * An image file as a 28×28 digit: a PNG as digitPixels reads it, any other format decoded by
 * sharp. A file that cannot be read or decoded is a UsageError naming it.
 */
export async function readDigitImage(file: string): Promise<Float32Array> {
  const bytes = readInput(file);
  if (hasPngSignature(bytes)) return pngDigit(bytes, file);
  let decoded: { data: Buffer; info: { width: number; height: number } };
  try {
    decoded = await sharpForPredict()(bytes, { autoOrient: true }).ensureAlpha().toColourspace('srgb').raw().toBuffer({ resolveWithObject: true });
  } catch (e) {
    if (e instanceof NodeformerError) throw e;
    throw new UsageError(`Expected an image (${SHARP_FORMATS}) for ${file} but received ${bytes.length} bytes that do not decode ` +
      `(they start with ${hex(bytes.subarray(0, 8)) || 'nothing'}; sharp: ${(e as Error).message})`);
  }
  return greyDigit(greyOverWhite(decoded.data), decoded.info.width, decoded.info.height, DIGIT_SIZE);
}

/**
 * Image files (any format sharp reads) through a folder-trained model's eval transform, as one
 * batch [n, 3, size, size]. A file that cannot be read or decoded is a UsageError naming it.
 */
export async function transformedBatch(files: readonly string[], t: ImageTransform): Promise<Tensor<'float32'>> {
  const sharp = sharpForPredict(), per = 3 * t.imageSize * t.imageSize, out = new Float32Array(files.length * per);
  for (const [i, file] of files.entries()) {
    readInput(file); // a clear message for a missing file
    try {
      await loadSample(sharp, file, t, 0, out, i * per);
    } catch (e) {
      if (e instanceof NodeformerError) throw new UsageError(`${e.message} (expected ${SHARP_FORMATS})`);
      throw e;
    }
  }
  return Tensor.from(out, [files.length, 3, t.imageSize, t.imageSize]);
}

/** Encodes a digit (pixels in [0, 1], white on black) as a 28×28 greyscale PNG. */
export function digitPng(pixels: Float32Array): Buffer {
  const png = new PNG({ width: DIGIT_SIZE, height: DIGIT_SIZE, colorType: 0, inputColorType: 0, inputHasAlpha: false });
  png.data = Buffer.from(Array.from(pixels, (v) => Math.round(255 * Math.min(1, Math.max(0, v)))));
  return PNG.sync.write(png, { colorType: 0, inputColorType: 0, inputHasAlpha: false });
}
