/**
 * The header of a PNG file, read without decoding: the 8-byte signature and the IHDR chunk that
 * must follow it (width, height, bit depth, colour type). TensorBoard's image summaries record it
 * beside the bytes; the command line and the example server check it before decoding a digit.
 */

/** The 8 bytes every PNG file starts with. */
export const PNG_SIGNATURE: readonly number[] = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];

/** What the IHDR chunk says. */
export interface PngHeader {
  width: number;
  height: number;
  /** 0 grey, 2 RGB, 3 palette, 4 grey + alpha, 6 RGBA (other values are invalid). */
  colorType: number;
}

/** Whether `bytes` start with the PNG signature. */
export function hasPngSignature(bytes: Uint8Array): boolean {
  return bytes.length >= PNG_SIGNATURE.length && PNG_SIGNATURE.every((b, i) => bytes[i] === b);
}

/** The IHDR chunk's numbers, or null unless `bytes` start with the signature and an IHDR chunk. */
export function readPngHeader(bytes: Uint8Array): PngHeader | null {
  if (bytes.length < 26 || !hasPngSignature(bytes) || String.fromCharCode(bytes[12], bytes[13], bytes[14], bytes[15]) !== 'IHDR') return null;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return { width: view.getUint32(16), height: view.getUint32(20), colorType: bytes[25] };
}
