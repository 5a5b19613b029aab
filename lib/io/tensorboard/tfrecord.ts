/**
 * TFRecord framing, the container of TensorBoard event files: each record is
 *   uint64 length (little-endian) | uint32 masked CRC-32C of those 8 bytes | data | uint32 masked CRC-32C of data.
 */
import { maskedCrc32c } from './crc32c';

/** One record's bytes: the framed `data`. */
export function tfRecord(data: Uint8Array): Uint8Array {
  const out = new Uint8Array(data.length + 16);
  const view = new DataView(out.buffer);
  view.setBigUint64(0, BigInt(data.length), true);
  view.setUint32(8, maskedCrc32c(out.subarray(0, 8)), true);
  out.set(data, 12);
  view.setUint32(12 + data.length, maskedCrc32c(data), true);
  return out;
}
