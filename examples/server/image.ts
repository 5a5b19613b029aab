/**
 * PNG bytes → the model's input: a size × size grayscale image in [0, 1], white digit on black
 * as in MNIST. Other sizes are padded to a square (black, centred) and area-resampled.
 */
import { PNG } from 'pngjs';

import { HttpError } from './http_error';

const SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];

/** Largest accepted width or height: the decoded RGBA image stays under 16 MiB. */
export const MAX_SIDE = 2048;

/**
 * Checks the signature and the IHDR dimensions without decoding, so a file that is no PNG or
 * would decode to a huge image is refused before any work. Returns width and height.
 */
export function pngHeader(bytes: Uint8Array): { width: number; height: number } {
  if (bytes.length === 0) throw new HttpError(400, 'empty_body', 'Expected a PNG image in the request body but received an empty body');
  if (bytes.length < 24 || SIGNATURE.some((b, i) => bytes[i] !== b) || String.fromCharCode(...bytes.subarray(12, 16)) !== 'IHDR')
    throw new HttpError(415, 'not_png', `Expected a PNG image (signature 89 50 4E 47 0D 0A 1A 0A, then IHDR) but received ${bytes.length} bytes of something else`);
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const width = dv.getUint32(16), height = dv.getUint32(20);
  if (width === 0 || height === 0 || width > MAX_SIDE || height > MAX_SIDE)
    throw new HttpError(400, 'bad_dimensions', `Expected a PNG of 1 to ${MAX_SIDE} pixels per side but received ${width}×${height}`);
  return { width, height };
}

/** Decodes a PNG (any colour type and bit depth) to `size` × `size` gray values in [0, 1]. */
export function pngToGray(bytes: Uint8Array, size: number): Float32Array {
  pngHeader(bytes);
  let png: PNG;
  try {
    png = PNG.sync.read(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
  } catch (e) {
    throw new HttpError(400, 'invalid_png', `Expected a valid PNG but decoding failed: ${(e as Error).message}`);
  }
  const { width: w, height: h, data } = png;
  // Luminance (ITU-R BT.601) composited over black, so transparent pixels are background.
  const gray = new Float32Array(w * h);
  for (let i = 0; i < w * h; i++) {
    const r = data[4 * i], g = data[4 * i + 1], b = data[4 * i + 2], a = data[4 * i + 3];
    gray[i] = ((0.299 * r + 0.587 * g + 0.114 * b) / 255) * (a / 255);
  }
  return w === size && h === size ? gray : resizeSquare(gray, w, h, size);
}

/** Pads to a centred square, then averages the source area under each target pixel. */
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
