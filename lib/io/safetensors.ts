/**
 * safetensors files (https://github.com/huggingface/safetensors): an 8-byte little-endian header
 * length, a JSON header {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {..}},
 * then the raw little-endian data. The parser checks everything before trusting it (sizes,
 * offsets inside the file and not overlapping, dtype × shape = byte range, unique names), so a
 * truncated or hostile file is an ERR_NF_FORMAT error, never a crash or a partial load.
 */
import * as fs from 'node:fs';

import { writeFileAtomic } from './atomic';
import { invalidArg, NodeformerError } from '../validation/errors';
import { Tensor } from '../core/tensor';

/** Element types of the format that this library reads. */
export type SafetensorsDType = 'F64' | 'F32' | 'F16' | 'BF16' | 'I64' | 'I32' | 'U8' | 'BOOL';
const ITEM_BYTES: Record<SafetensorsDType, number> = { F64: 8, F32: 4, F16: 2, BF16: 2, I64: 8, I32: 4, U8: 1, BOOL: 1 };

/** One entry as stored: F64 stays a Float64Array, F16/BF16 become Float32Array, I64 becomes Int32Array. */
export interface RawEntry {
  dtype: SafetensorsDType;
  shape: number[];
  data: Float64Array | Float32Array | Int32Array | Uint8Array;
}

export interface ParsedSafetensors {
  entries: Record<string, RawEntry>;
  metadata: Record<string, string>;
}

const MAX_HEADER = 100 * 1024 * 1024;

function formatError(message: string): never {
  throw new NodeformerError('ERR_NF_FORMAT', `safetensors: ${message}`);
}

/** First bytes of files that get passed for weights files by mistake, and what they are. */
const SIGNATURES: readonly (readonly [string, readonly number[]])[] = [
  ['a PNG image', [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]],
  ['a JPEG image', [0xff, 0xd8, 0xff]],
  ['a GIF image', [0x47, 0x49, 0x46, 0x38]],
  ['a ZIP archive (PyTorch .pt/.pth checkpoints are ZIP archives: convert them to safetensors)', [0x50, 0x4b, 0x03, 0x04]],
];

/**
 * Throws ERR_NF_FORMAT "<source> is not a safetensors file" for a file whose header length field
 * is past its end and whose header does not start like JSON ('{'): something else entirely, not
 * a truncated safetensors file. Names the kind of file when its first bytes tell.
 */
function notSafetensors(bytes: Uint8Array, headerLen: bigint, source: string): void {
  if (bytes[8] === 0x7b) return; // '{': a safetensors header, cut short
  const kind = SIGNATURES.find(([, sig]) => sig.every((b, i) => bytes[i] === b))?.[0];
  const first = Array.from(bytes.subarray(0, 8), (b) => b.toString(16).padStart(2, '0')).join(' ');
  formatError(`${source} is not a safetensors file (${kind ? `it is ${kind}` : `it starts with the bytes ${first}`}; ` +
    `read as a safetensors file its header length would be ${headerLen}, for a file of ${bytes.length} bytes)`);
}

function halfToFloat(h: number): number {
  const s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 0x1f, f = h & 0x3ff;
  if (e === 0) return s * f * 2 ** -24;
  if (e === 31) return f ? NaN : s * Infinity;
  return s * (1 + f / 1024) * 2 ** (e - 15);
}

function decode(dtype: SafetensorsDType, bytes: Uint8Array, count: number, name: string): RawEntry['data'] {
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  switch (dtype) {
    case 'F64': {
      const out = new Float64Array(count);
      for (let i = 0; i < count; i++) out[i] = dv.getFloat64(i * 8, true);
      return out;
    }
    case 'F32': {
      const out = new Float32Array(count);
      for (let i = 0; i < count; i++) out[i] = dv.getFloat32(i * 4, true);
      return out;
    }
    case 'F16': {
      const out = new Float32Array(count);
      for (let i = 0; i < count; i++) out[i] = halfToFloat(dv.getUint16(i * 2, true));
      return out;
    }
    case 'BF16': {
      const out = new Float32Array(count);
      const u = new Uint32Array(out.buffer);
      for (let i = 0; i < count; i++) u[i] = dv.getUint16(i * 2, true) << 16;
      return out;
    }
    case 'I64': {
      const out = new Int32Array(count);
      for (let i = 0; i < count; i++) {
        const v = dv.getBigInt64(i * 8, true);
        if (v < -2147483648n || v > 2147483647n) formatError(`${JSON.stringify(name)}: int64 value ${v} does not fit int32`);
        out[i] = Number(v);
      }
      return out;
    }
    case 'I32': {
      const out = new Int32Array(count);
      for (let i = 0; i < count; i++) out[i] = dv.getInt32(i * 4, true);
      return out;
    }
    default:
      return bytes.slice();
  }
}

/** Finds a key that occurs twice among the top-level keys of a JSON object text (JSON.parse keeps the last silently). */
function duplicateTopLevelKey(json: string): string | null {
  const seen = new Set<string>();
  let depth = 0;
  for (let i = 0; i < json.length; i++) {
    const c = json[i];
    if (c === '"') {
      let j = i + 1;
      while (j < json.length && json[j] !== '"') j += json[j] === '\\' ? 2 : 1;
      if (depth === 1) {
        let k = j + 1;
        while (k < json.length && /\s/.test(json[k])) k++;
        if (json[k] === ':') {
          const key = JSON.parse(json.slice(i, j + 1)) as string;
          if (seen.has(key)) return key;
          seen.add(key);
        }
      }
      i = j;
    } else if (c === '{' || c === '[') depth++;
    else if (c === '}' || c === ']') depth--;
  }
  return null;
}

/** An entry checked against the file, not yet decoded. */
interface Planned {
  name: string;
  dtype: SafetensorsDType;
  shape: number[];
  begin: number;
  end: number;
}

/** Checks one header entry against the `dataBytes` of the data section. */
function planEntry(name: string, info: unknown, dataBytes: number): Planned {
  const at = JSON.stringify(name);
  if (info === null || typeof info !== 'object' || Array.isArray(info)) formatError(`${at}: entry is not an object`);
  const e = info as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
  if (typeof e.dtype !== 'string' || !Object.hasOwn(ITEM_BYTES, e.dtype)) formatError(`${at}: unsupported dtype ${JSON.stringify(e.dtype)}`);
  const dtype = e.dtype as SafetensorsDType;
  if (!Array.isArray(e.shape) || e.shape.some((d) => !Number.isSafeInteger(d) || d < 0))
    formatError(`${at}: shape must be an array of non-negative integers`);
  const shape = e.shape as number[];
  const offs = e.data_offsets;
  if (!Array.isArray(offs) || offs.length !== 2 || offs.some((d) => !Number.isSafeInteger(d) || d < 0))
    formatError(`${at}: data_offsets must be two non-negative integers`);
  const [begin, end] = offs as number[];
  if (begin > end || end > dataBytes) formatError(`${at}: data_offsets [${begin}, ${end}] fall outside the ${dataBytes} data bytes`);
  const bytes = shape.reduce((a, b) => a * b, 1) * ITEM_BYTES[dtype];
  if (bytes !== end - begin)
    formatError(`${at}: ${dtype} [${shape.join(', ')}] needs ${bytes} bytes but data_offsets cover ${end - begin}`);
  return { name, dtype, shape, begin, end };
}

/**
 * Parses and validates a whole safetensors file held in memory. Every entry is checked (and
 * overlaps ruled out) before any is decoded, so a hostile file costs no more than its own size.
 * `source` (the file's path) names the bytes in messages.
 */
export function parseSafetensors(bytes: Uint8Array, source = 'the input'): ParsedSafetensors {
  if (!(bytes instanceof Uint8Array)) invalidArg('bytes', 'a Uint8Array', bytes);
  if (bytes.length < 8) formatError(`file of ${bytes.length} bytes is too short for the 8-byte header length`);
  const headerLen = new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true);
  if (headerLen > BigInt(Math.min(MAX_HEADER, bytes.length - 8))) {
    notSafetensors(bytes, headerLen, source);
    formatError(`header length ${headerLen} exceeds the file (${bytes.length} bytes) or the ${MAX_HEADER}-byte limit`);
  }
  const n = Number(headerLen);
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(8, 8 + n));
  } catch {
    formatError('header is not valid UTF-8');
  }
  let header: unknown;
  try {
    header = JSON.parse(text);
  } catch (e) {
    formatError(`header is not valid JSON (${(e as Error).message})`);
  }
  if (header === null || typeof header !== 'object' || Array.isArray(header)) formatError('header is not a JSON object');
  const dup = duplicateTopLevelKey(text);
  if (dup !== null) formatError(`duplicate tensor name ${JSON.stringify(dup)}`);
  const data = bytes.subarray(8 + n);
  let metadata: Record<string, string> = {};
  const plan: Planned[] = [];
  for (const [name, info] of Object.entries(header as Record<string, unknown>)) {
    if (name !== '__metadata__') {
      plan.push(planEntry(name, info, data.length));
    } else if (info === null || typeof info !== 'object' || Array.isArray(info) || Object.values(info).some((v) => typeof v !== 'string')) {
      formatError('__metadata__ must be an object of strings');
    } else {
      metadata = info as Record<string, string>;
    }
  }
  // Two entries overlap when they share a byte (empty entries share none).
  const ranges = plan.filter((p) => p.end > p.begin).sort((a, b) => a.begin - b.begin);
  for (let i = 1; i < ranges.length; i++)
    if (ranges[i].begin < ranges[i - 1].end)
      formatError(`${JSON.stringify(ranges[i - 1].name)} and ${JSON.stringify(ranges[i].name)} overlap`);
  // A null-prototype record, so a tensor named "__proto__" is an entry like any other.
  const entries: Record<string, RawEntry> = Object.create(null);
  for (const p of plan) {
    const count = p.shape.reduce((a, b) => a * b, 1);
    entries[p.name] = { dtype: p.dtype, shape: p.shape, data: decode(p.dtype, data.subarray(p.begin, p.end), count, p.name) };
  }
  return { entries, metadata };
}

function checkPath(path: unknown): asserts path is string {
  if (typeof path !== 'string' || path.length === 0) invalidArg('path', 'a file path string', path);
}

function readError(path: string, e: unknown): NodeformerError {
  return new NodeformerError('ERR_NF_INVALID_ARG', `Cannot read path ${JSON.stringify(path)}: ${(e as Error).message}`);
}

/** Reads a whole file; a failure is ERR_NF_INVALID_ARG naming the path. */
export function readFile(path: string): Uint8Array {
  checkPath(path);
  try {
    return fs.readFileSync(path);
  } catch (e) {
    throw readError(path, e);
  }
}

/** readFile off the main thread. */
export async function readFileAsync(path: string): Promise<Uint8Array> {
  checkPath(path);
  try {
    return await fs.promises.readFile(path);
  } catch (e) {
    throw readError(path, e);
  }
}

/** Reads and validates a safetensors file: its raw entries and metadata. */
export function readSafetensors(path: string): ParsedSafetensors {
  return parseSafetensors(readFile(path), path);
}

/** The metadata strings of a safetensors file (its "__metadata__"). */
export function readSafetensorsMetadata(path: string): Record<string, string> {
  return readSafetensors(path).metadata;
}

/** Converts parsed entries to tensors: floats to float32, integers to int32, U8/BOOL to bool. */
export function entriesToTensors(entries: Record<string, RawEntry>): Record<string, Tensor> {
  const out: Record<string, Tensor> = Object.create(null);
  try {
    for (const [name, e] of Object.entries(entries)) {
      const d = e.data;
      out[name] = Tensor.from(d instanceof Float64Array ? Float32Array.from(d) : d, e.shape);
    }
  } catch (err) {
    for (const t of Object.values(out)) t.dispose();  // no half-made record (out of memory) is left behind
    throw err;
  }
  return out;
}

/** Loads every tensor of a safetensors file (F64/F16/BF16 become float32, I64 becomes int32). */
export function loadSafetensors(path: string): Record<string, Tensor> {
  return entriesToTensors(readSafetensors(path).entries);
}

/** loadSafetensors with the file read off the main thread (fs.promises); parsing runs when the bytes are in. */
export async function loadSafetensorsAsync(path: string): Promise<Record<string, Tensor>> {
  return entriesToTensors(parseSafetensors(await readFileAsync(path), path).entries);
}

const DTYPE_OF: Record<string, SafetensorsDType> = { float32: 'F32', int32: 'I32', bool: 'BOOL' };

/**
 * Serialises tensors (and string metadata) to safetensors bytes, names sorted, 8-byte aligned
 * header. Tensors on a device (a CUDA model's state dict) are copied to the host here.
 */
export function serializeSafetensors(record: Record<string, Tensor>, metadata: Record<string, string> = {}): Uint8Array {
  if (record === null || typeof record !== 'object') invalidArg('record', 'an object of tensors', record);
  if (metadata === null || typeof metadata !== 'object') invalidArg('metadata', 'an object of strings', metadata);
  const header: Record<string, unknown> = Object.create(null);
  const names = Object.keys(record).sort();
  const values = new Map<string, Float32Array | Int32Array | Uint8Array>();
  let offset = 0;
  for (const name of names) {
    const t = record[name];
    if (name === '__metadata__') invalidArg('record', 'tensor names other than "__metadata__" (the format reserves it)', record);
    if (!(t instanceof Tensor)) invalidArg(`record[${JSON.stringify(name)}]`, 'a Tensor', t);
    if (t.disposed) throw new NodeformerError('ERR_NF_DISPOSED', `record[${JSON.stringify(name)}] is a disposed tensor`);
    const d = t.hostValues();
    values.set(name, d);
    header[name] = { dtype: DTYPE_OF[t.dtype], shape: [...t.shape], data_offsets: [offset, offset + d.byteLength] };
    offset += d.byteLength;
  }
  if (Object.keys(metadata).length) {
    for (const [k, v] of Object.entries(metadata)) if (typeof v !== 'string') invalidArg(`metadata.${k}`, 'a string', v);
    header.__metadata__ = metadata;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - ((Buffer.byteLength(json) + 8) % 8)) % 8);
  const headerBytes = Buffer.from(json, 'utf8');
  const out = new Uint8Array(8 + headerBytes.length + offset);
  new DataView(out.buffer).setBigUint64(0, BigInt(headerBytes.length), true);
  out.set(headerBytes, 8);
  let pos = 8 + headerBytes.length;
  for (const name of names) {
    const d = values.get(name)!;
    out.set(new Uint8Array(d.buffer, d.byteOffset, d.byteLength), pos);
    pos += d.byteLength;
  }
  return out;
}

/** Writes tensors to a safetensors file atomically (a temporary file flushed and renamed over the target; see lib/io/atomic.ts). */
export function saveSafetensors(path: string, record: Record<string, Tensor>, metadata: Record<string, string> = {}): void {
  checkPath(path);
  writeFileAtomic(path, serializeSafetensors(record, metadata));
}
