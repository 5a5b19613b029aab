/**
 * Posted PNG bytes → the model's input, with the preprocessing of `nodeformer predict`
 * (lib/cli/images.ts: light digit on dark, dark-on-light pictures inverted, padded to a square and
 * resampled), so the service and the command line predict the same digit for the same picture.
 * Here its errors become HTTP errors.
 */
import { digitPixels, pngSize } from '../../lib/cli/images';
import { NodeformerError } from '../../lib/index';
import { HttpError } from './http_error';

/** Largest accepted width or height: the decoded RGBA image stays under 16 MiB. */
export const MAX_SIDE = 2048;

/**
 * Checks the signature and the IHDR dimensions without decoding, so a body that is no PNG or
 * would decode to a huge image is refused before any work. Returns width and height.
 */
export function pngHeader(bytes: Uint8Array): { width: number; height: number } {
  if (bytes.length === 0) throw new HttpError(400, 'empty_body', 'Expected a PNG image in the request body but received an empty body');
  let size: { width: number; height: number };
  try {
    size = pngSize(bytes, 'the request body');
  } catch (e) {
    if (e instanceof NodeformerError) throw new HttpError(415, 'not_png', e.message);
    throw e;
  }
  if (size.width === 0 || size.height === 0 || size.width > MAX_SIDE || size.height > MAX_SIDE)
    throw new HttpError(400, 'bad_dimensions', `Expected a PNG of 1 to ${MAX_SIDE} pixels per side but received ${size.width}×${size.height}`);
  return size;
}

/** A posted PNG as a `size` × `size` digit in [0, 1] (lib's digitPixels); a PNG that does not decode is a 400. */
export function pngToDigit(bytes: Uint8Array, size: number): Float32Array {
  pngHeader(bytes);
  try {
    return digitPixels(bytes, size, 'the request body');
  } catch (e) {
    if (e instanceof NodeformerError) throw new HttpError(400, 'invalid_png', e.message);
    throw e;
  }
}
