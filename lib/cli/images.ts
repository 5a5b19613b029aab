/**
 * Reading digit pictures for `nodeformer predict`: any PNG (grey, RGB, with or without alpha, any
 * size) becomes a 28×28 image with pixels in [0, 1], white digit on black as in MNIST.
 */
import * as fs from 'node:fs';

import { PNG } from 'pngjs';

import { DIGIT_SIZE } from './mnist';
import { UsageError } from './usage';

/** Decodes a PNG file to grey levels in [0, 1] (alpha composited over white), row-major [height, width]. */
export function readGreyPng(file: string): { width: number; height: number; grey: Float32Array } {
  let bytes: Buffer;
  try {
    bytes = fs.readFileSync(file);
  } catch (e) {
    throw new UsageError(`Cannot read ${file}: ${(e as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (e as Error).message}`);
  }
  let png: PNG;
  try {
    png = PNG.sync.read(bytes);
  } catch (e) {
    throw new UsageError(`Expected a PNG image for ${file} but it cannot be decoded (${(e as Error).message})`);
  }
  const { width, height, data } = png;
  const grey = new Float32Array(width * height);
  for (let i = 0; i < grey.length; i++) {
    const a = data[4 * i + 3] / 255;
    const lum = (0.299 * data[4 * i] + 0.587 * data[4 * i + 1] + 0.114 * data[4 * i + 2]) / 255;
    grey[i] = a * lum + (1 - a);
  }
  return { width, height, grey };
}

/** Resamples a grey image to 28×28 by averaging the source area under each target pixel. */
function resize(grey: Float32Array, width: number, height: number): Float32Array {
  const out = new Float32Array(DIGIT_SIZE * DIGIT_SIZE);
  for (let ty = 0; ty < DIGIT_SIZE; ty++)
    for (let tx = 0; tx < DIGIT_SIZE; tx++) {
      const y0 = Math.floor((ty * height) / DIGIT_SIZE), y1 = Math.max(y0 + 1, Math.floor(((ty + 1) * height) / DIGIT_SIZE));
      const x0 = Math.floor((tx * width) / DIGIT_SIZE), x1 = Math.max(x0 + 1, Math.floor(((tx + 1) * width) / DIGIT_SIZE));
      let sum = 0;
      for (let y = y0; y < y1; y++) for (let x = x0; x < x1; x++) sum += grey[y * width + x];
      out[ty * DIGIT_SIZE + tx] = sum / ((y1 - y0) * (x1 - x0));
    }
  return out;
}

/**
 * A PNG file as an MNIST-like digit: resized to 28×28 and inverted when its border is light
 * (a dark digit on white paper), so the digit is bright on a dark background.
 */
export function readDigitPng(file: string): Float32Array {
  const { width, height, grey } = readGreyPng(file);
  const img = width === DIGIT_SIZE && height === DIGIT_SIZE ? grey : resize(grey, width, height);
  let border = 0;
  for (let i = 0; i < DIGIT_SIZE; i++)
    border += img[i] + img[(DIGIT_SIZE - 1) * DIGIT_SIZE + i] + img[i * DIGIT_SIZE] + img[i * DIGIT_SIZE + DIGIT_SIZE - 1];
  if (border / (4 * DIGIT_SIZE) > 0.5) for (let i = 0; i < img.length; i++) img[i] = 1 - img[i];
  return img;
}

/** Encodes a digit (pixels in [0, 1], white on black) as a 28×28 greyscale PNG. */
export function digitPng(pixels: Float32Array): Buffer {
  const png = new PNG({ width: DIGIT_SIZE, height: DIGIT_SIZE, colorType: 0, inputColorType: 0, inputHasAlpha: false });
  png.data = Buffer.from(Array.from(pixels, (v) => Math.round(255 * Math.min(1, Math.max(0, v)))));
  return PNG.sync.write(png, { colorType: 0, inputColorType: 0, inputHasAlpha: false });
}
