#!/usr/bin/env node
// Writes the seed corpus of the safetensors fuzzer (test/safetensors.fuzz.test.ts) into
// test/fuzz-corpus/safetensors: ok-* files the parser must accept, bad-* files it must reject with
// ERR_NF_FORMAT. Files the fuzzer finds (found-*, written with NF_FUZZ_SAVE=1) sit beside them.
// Usage: node scripts/make_fuzz_corpus.mjs
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const dir = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'test', 'fuzz-corpus', 'safetensors');
fs.mkdirSync(dir, { recursive: true });

/** 8-byte little-endian header length (default: the header's), header bytes, data. */
function file(header, data = new Uint8Array(0), length) {
  const h = typeof header === 'string' ? Buffer.from(header) : Buffer.from(header);
  const out = new Uint8Array(8 + h.length + data.length);
  new DataView(out.buffer).setBigUint64(0, length ?? BigInt(h.length), true);
  out.set(h, 8);
  out.set(data, 8 + h.length);
  return out;
}
const json = (o) => JSON.stringify(o);
const f32 = (shape, b, e) => ({ dtype: 'F32', shape, data_offsets: [b, e] });
const bytes = (n) => Uint8Array.from({ length: n }, (_, i) => (i * 37) & 0xff);

const ok = {
  'empty-header': file('{}'),
  'padded-header': file('{}      '),
  'one-f32': file(json({ w: f32([2, 2], 0, 16) }), new Uint8Array(new Float32Array([1, -2, 3.5, 0]).buffer)),
  'every-dtype': file(json({
    a: { dtype: 'F64', shape: [1], data_offsets: [0, 8] }, b: { dtype: 'F32', shape: [1], data_offsets: [8, 12] },
    c: { dtype: 'F16', shape: [2], data_offsets: [12, 16] }, d: { dtype: 'BF16', shape: [2], data_offsets: [16, 20] },
    e: { dtype: 'I64', shape: [1], data_offsets: [20, 28] }, f: { dtype: 'I32', shape: [1], data_offsets: [28, 32] },
    g: { dtype: 'U8', shape: [2], data_offsets: [32, 34] }, h: { dtype: 'BOOL', shape: [2], data_offsets: [34, 36] },
  }), new Uint8Array(36)),
  'scalar-and-empty': file(json({ s: f32([], 0, 4), z: f32([0, 5], 4, 4), y: f32([3, 0], 4, 4) }), new Uint8Array(4)),
  'metadata': file(json({ __metadata__: { format: 'pt', note: 'ü ✓' }, w: f32([1], 0, 4) }), new Uint8Array(4)),
  'proto-name': file('{"__proto__":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', bytes(8)),
  'unordered-offsets': file(json({ b: f32([1], 4, 8), a: f32([1], 0, 4) }), new Uint8Array(8)),
  'hole-between': file(json({ a: f32([1], 0, 4), b: f32([1], 8, 12) }), new Uint8Array(12)),
  'trailing-bytes': file(json({ a: f32([1], 0, 4) }), new Uint8Array(10)),
  'unicode-name': file(json({ 'größe.gewicht': f32([1], 0, 4) }), new Uint8Array(4)),
  'nan-inf-values': file(json({ a: f32([3], 0, 12) }), new Uint8Array(new Float32Array([NaN, Infinity, -Infinity]).buffer)),
};
const bad = {
  'empty-file': new Uint8Array(0),
  'seven-bytes': new Uint8Array(7),
  'header-length-max': file('{}', undefined, 2n ** 64n - 1n),
  'header-length-past-end': file('{}', undefined, 100n),
  'header-length-zero': file('{}', undefined, 0n),
  'invalid-json': file('{"a": '),
  'json-array': file('[1,2]'),
  'json-string': file('"x"'),
  'not-utf8': file(Uint8Array.from([0x7b, 0x22, 0xc3, 0x28, 0x22, 0x3a, 0x31, 0x7d])),
  'entry-number': file(json({ a: 1 })),
  'unknown-dtype': file(json({ a: { dtype: 'F8', shape: [1], data_offsets: [0, 1] } }), new Uint8Array(1)),
  'dtype-tostring': file(json({ a: { dtype: 'toString', shape: [1], data_offsets: [0, 4] } }), new Uint8Array(4)),
  'negative-shape': file(json({ a: f32([-1], 0, 0) })),
  'fractional-shape': file(json({ a: f32([0.5], 0, 2) }), new Uint8Array(2)),
  'huge-shape': file(json({ a: f32([2 ** 40, 2 ** 40], 0, 4) }), new Uint8Array(4)),
  'offsets-past-end': file(json({ a: f32([4], 0, 16) }), new Uint8Array(8)),
  'offsets-reversed': file(json({ a: f32([0], 8, 4) }), new Uint8Array(8)),
  'offsets-beyond-2p53': file('{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,9007199254740993]}}', new Uint8Array(4)),
  'size-mismatch': file(json({ a: f32([3], 0, 8) }), new Uint8Array(8)),
  'overlap': file(json({ a: f32([2], 0, 8), b: f32([2], 4, 12) }), new Uint8Array(12)),
  'same-bytes-many-times': file(json(Object.fromEntries(Array.from({ length: 64 }, (_, i) => [`t${i}`, f32([256], 0, 1024)]))), new Uint8Array(1024)),
  'duplicate-name': file('{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', new Uint8Array(4)),
  'duplicate-escaped-name': file('{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"\\u0061":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', new Uint8Array(8)),
  'metadata-number': file(json({ __metadata__: { a: 1 } })),
  'metadata-array': file(json({ __metadata__: ['a'] })),
  'i64-past-int32': file(json({ a: { dtype: 'I64', shape: [1], data_offsets: [0, 8] } }), Uint8Array.from([0, 0, 0, 128, 0, 0, 0, 0])),
  'deep-json': file(`{"a":${'['.repeat(20000)}${']'.repeat(20000)}}`),
  'truncated-data': file(json({ w: f32([4, 4], 0, 64) }), new Uint8Array(20)),
};
for (const [n, b] of Object.entries(ok)) fs.writeFileSync(path.join(dir, `ok-${n}.safetensors`), b);
for (const [n, b] of Object.entries(bad)) fs.writeFileSync(path.join(dir, `bad-${n}.safetensors`), b);
console.log(`wrote ${Object.keys(ok).length} ok and ${Object.keys(bad).length} bad files to ${dir}`);
