/**
 * CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), table-driven, and TensorFlow's masked
 * form that TFRecord framing stores: ((crc >>> 15) | (crc << 17)) + 0xa282ead8, modulo 2^32.
 */

const TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0x82f63b78 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

/** The CRC-32C of `bytes` (an unsigned 32-bit integer); crc32c of "123456789" is 0xE3069283. */
export function crc32c(bytes: Uint8Array): number {
  let c = 0xffffffff;
  for (let i = 0; i < bytes.length; i++) c = TABLE[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

/** TensorFlow's masked CRC-32C (tensorflow/core/lib/hash/crc32c.h: Mask), as TFRecord files store it. */
export function maskedCrc32c(bytes: Uint8Array): number {
  const c = crc32c(bytes);
  return (((c >>> 15) | (c << 17)) + 0xa282ead8) >>> 0;
}
