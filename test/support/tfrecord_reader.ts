/**
 * A small reader of TensorBoard event files for the tests, written independently of the writer:
 * TFRecord framing with both CRCs checked (CRC-32C bit by bit, not table-driven), a generic
 * protocol-buffers decoder, and the Event / Summary fields the SummaryWriter writes.
 */

/** CRC-32C bit by bit (the writer's is table-driven). */
function crc32cBitwise(bytes: Uint8Array): number {
  let c = ~0;
  for (const b of bytes) {
    c ^= b;
    for (let k = 0; k < 8; k++) c = (c >>> 1) ^ (0x82f63b78 & -(c & 1));
  }
  return ~c >>> 0;
}

function masked(bytes: Uint8Array): number {
  const c = crc32cBitwise(bytes);
  return (((c >>> 15) | (c << 17)) + 0xa282ead8) >>> 0;
}

/** The records of a TFRecord file; throws on a bad length, CRC or a truncated record. */
export function readRecords(file: Uint8Array): Uint8Array[] {
  const view = new DataView(file.buffer, file.byteOffset, file.byteLength);
  const out: Uint8Array[] = [];
  for (let at = 0; at < file.length;) {
    if (at + 12 > file.length) throw new Error(`truncated header at ${at}`);
    const len = Number(view.getBigUint64(at, true));
    if (view.getUint32(at + 8, true) !== masked(file.subarray(at, at + 8))) throw new Error(`bad length CRC at ${at}`);
    if (at + 16 + len > file.length) throw new Error(`truncated record at ${at}`);
    const data = file.subarray(at + 12, at + 12 + len);
    if (view.getUint32(at + 12 + len, true) !== masked(data)) throw new Error(`bad data CRC at ${at}`);
    out.push(data);
    at += 16 + len;
  }
  return out;
}

/** One decoded field: varints as bigint, fixed64 and fixed32 as their raw bytes, length-delimited as bytes. */
export interface Field {
  wire: number;
  varint?: bigint;
  bytes: Uint8Array;
}

/** A message's fields by number, in order. */
export type Message = Map<number, Field[]>;

/** Decodes one protocol-buffers message. */
export function decode(buf: Uint8Array): Message {
  const fields: Message = new Map();
  let at = 0;
  const varint = (): bigint => {
    let v = 0n, shift = 0n;
    for (;;) {
      if (at >= buf.length) throw new Error('truncated varint');
      const b = buf[at++];
      v |= BigInt(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
      shift += 7n;
    }
  };
  while (at < buf.length) {
    const key = Number(varint()), field = key >>> 3, wire = key & 7;
    let f: Field;
    if (wire === 0) f = { wire, varint: varint(), bytes: new Uint8Array(0) };
    else if (wire === 1 || wire === 5) {
      const n = wire === 1 ? 8 : 4;
      f = { wire, bytes: buf.subarray(at, at + n) };
      at += n;
    } else if (wire === 2) {
      const n = Number(varint());
      f = { wire, bytes: buf.subarray(at, at + n) };
      at += n;
    } else throw new Error(`unexpected wire type ${wire}`);
    if (at > buf.length) throw new Error('truncated field');
    fields.set(field, [...(fields.get(field) ?? []), f]);
  }
  return fields;
}

const dv = (b: Uint8Array) => new DataView(b.buffer, b.byteOffset, b.byteLength);
/** The last occurrence of a field, or undefined. */
export const one = (m: Message, n: number): Field | undefined => m.get(n)?.at(-1);
export const double = (m: Message, n: number): number | undefined => { const f = one(m, n); return f && dv(f.bytes).getFloat64(0, true); };
export const float = (m: Message, n: number): number | undefined => { const f = one(m, n); return f && dv(f.bytes).getFloat32(0, true); };
export const int = (m: Message, n: number): number | undefined => { const f = one(m, n); return f && Number(f.varint); };
export const str = (m: Message, n: number): string | undefined => { const f = one(m, n); return f && new TextDecoder().decode(f.bytes); };
export const sub = (m: Message, n: number): Message | undefined => { const f = one(m, n); return f && decode(f.bytes); };
export const subs = (m: Message, n: number): Message[] => (m.get(n) ?? []).map((f) => decode(f.bytes));
/** A packed repeated double field. */
export const doubles = (m: Message, n: number): number[] => {
  const f = one(m, n);
  if (!f) return [];
  return Array.from({ length: f.bytes.length / 8 }, (_, i) => dv(f.bytes).getFloat64(i * 8, true));
};

/** A Summary.Value as the tests read it. */
export interface SummaryValue {
  tag: string;
  simpleValue?: number;
  image?: { height: number; width: number; colorspace: number; encoded: Uint8Array };
  histo?: { min: number; max: number; num: number; sum: number; sumSquares: number; bucketLimit: number[]; bucket: number[] };
  plugin?: { name: string; content: Uint8Array };
  tensor?: { dtype: number; shape: number[]; strings: string[] };
}

/** An Event as the tests read it. */
export interface EventRecord {
  wallTime: number;
  step: number;
  fileVersion?: string;
  values: SummaryValue[];
}

function summaryValue(v: Message): SummaryValue {
  const out: SummaryValue = { tag: str(v, 1) ?? '' };
  if (v.has(2)) out.simpleValue = float(v, 2);
  const img = sub(v, 4);
  if (img) out.image = { height: int(img, 1) ?? 0, width: int(img, 2) ?? 0, colorspace: int(img, 3) ?? 0, encoded: Uint8Array.from(one(img, 4)?.bytes ?? []) };
  const h = sub(v, 5);
  if (h) out.histo = { min: double(h, 1) ?? 0, max: double(h, 2) ?? 0, num: double(h, 3) ?? 0, sum: double(h, 4) ?? 0,
    sumSquares: double(h, 5) ?? 0, bucketLimit: doubles(h, 6), bucket: doubles(h, 7) };
  const meta = sub(v, 9), plugin = meta && sub(meta, 1);
  if (plugin) out.plugin = { name: str(plugin, 1) ?? '', content: Uint8Array.from(one(plugin, 2)?.bytes ?? []) };
  const t = sub(v, 8);
  if (t) out.tensor = { dtype: int(t, 1) ?? 0, shape: subs(sub(t, 2) ?? new Map(), 2).map((d) => int(d, 1) ?? 0),
    strings: (t.get(8) ?? []).map((f) => new TextDecoder().decode(f.bytes)) };
  return out;
}

/** The events of an event file's bytes. */
export function readEvents(file: Uint8Array): EventRecord[] {
  return readRecords(file).map((r) => {
    const e = decode(r);
    const summary = sub(e, 5);
    return { wallTime: double(e, 1) ?? 0, step: int(e, 2) ?? 0, fileVersion: str(e, 3),
      values: summary ? subs(summary, 1).map(summaryValue) : [] };
  });
}
