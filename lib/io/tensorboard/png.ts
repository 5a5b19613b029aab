/** The header of a PNG file (lib/png): what TensorBoard's image summary records beside the bytes. */
import { invalidArg } from '../../validation/errors';
import { readPngHeader } from '../png';

/** Channels by PNG colour type: grey, RGB, palette (shown as RGB), grey + alpha, RGBA. */
const CHANNELS: Record<number, number> = { 0: 1, 2: 3, 3: 3, 4: 2, 6: 4 };

/** Width, height and channel count (TensorBoard's colorspace) of a PNG image. */
export interface PngInfo {
  width: number;
  height: number;
  colorspace: number;
}

/** Reads the IHDR chunk of `png`; throws ERR_NF_INVALID_ARG (naming `name`) unless it starts like a PNG file. */
export function pngInfo(name: string, png: unknown): PngInfo {
  if (!(png instanceof Uint8Array)) return invalidArg(name, 'the bytes of a PNG file (Uint8Array)', png);
  const header = readPngHeader(png);
  if (!header) return invalidArg(name, 'the bytes of a PNG file (signature and IHDR chunk)', png);
  const { width, height } = header, colorspace = CHANNELS[header.colorType];
  if (width === 0 || height === 0 || colorspace === undefined)
    invalidArg(name, 'a PNG image with a non-zero size and a valid colour type', png);
  return { width, height, colorspace };
}
