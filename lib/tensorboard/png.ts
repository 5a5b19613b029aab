/** The header of a PNG file: what TensorBoard's image summary records beside the bytes. */
import { invalidArg } from '../errors';

const SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];

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
  const ok = png.length >= 33 && SIGNATURE.every((b, i) => png[i] === b) &&
    String.fromCharCode(png[12], png[13], png[14], png[15]) === 'IHDR';
  if (!ok) invalidArg(name, 'the bytes of a PNG file (signature and IHDR chunk)', png);
  const view = new DataView(png.buffer, png.byteOffset, png.byteLength);
  const width = view.getUint32(16), height = view.getUint32(20), colorspace = CHANNELS[png[25]];
  if (width === 0 || height === 0 || colorspace === undefined)
    invalidArg(name, 'a PNG image with a non-zero size and a valid colour type', png);
  return { width, height, colorspace };
}
