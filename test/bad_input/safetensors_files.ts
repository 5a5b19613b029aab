/**
 * Bad input to the safetensors functions: truncated and hostile files (header lengths past the
 * file or 2^64 − 1, invalid JSON, entries that are not objects, unknown dtypes, shapes and offsets
 * that are negative, fractional, past the end, overlapping or not matching shape × dtype,
 * duplicate names, bad metadata, int64 values past int32) — each ERR_NF_FORMAT naming what is
 * wrong — bad paths and records, and loading a mismatched file into a model, which must leave
 * every weight as it was.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { expect } from 'vitest';

import { Linear } from '../../lib/layers/linear';
import { loadSafetensors, parseSafetensors, readSafetensorsMetadata, saveSafetensors, serializeSafetensors } from '../../lib/io/safetensors';
import { Tensor } from '../../lib/core/tensor';
import { Catalogue } from './case';

/** A file with `header` (or the raw header text) and `data`; `length` overrides the header length field. */
export function fileWith(header: unknown, data: Uint8Array = new Uint8Array(0), raw?: string | Uint8Array, length?: bigint): Uint8Array {
  const json = typeof raw === 'string' ? Buffer.from(raw) : raw ?? Buffer.from(JSON.stringify(header));
  const out = new Uint8Array(8 + json.length + data.length);
  new DataView(out.buffer).setBigUint64(0, length ?? BigInt(json.length), true);
  out.set(json, 8);
  out.set(data, 8 + json.length);
  return out;
}

const f32entry = (shape: unknown, offsets: unknown) => ({ dtype: 'F32', shape, data_offsets: offsets });

/** Hostile files: [what, bytes, what the message must name]. */
export const hostileFiles: [string, Uint8Array, RegExp][] = [
  ['an empty file', new Uint8Array(0), /too short/],
  ['7 bytes', new Uint8Array(7), /too short/],
  ['a header length of 2^64 - 1', fileWith({}, undefined, undefined, 2n ** 64n - 1n), /header length/],
  ['a header length past the end', fileWith({}, undefined, undefined, 1000n), /header length/],
  ['a header length of 0', fileWith({}, undefined, '', 0n), /not valid JSON/],
  ['invalid JSON', fileWith(null, undefined, '{"a": '), /not valid JSON/],
  ['a JSON array header', fileWith([1, 2]), /not a JSON object/],
  ['a JSON null header', fileWith(null), /not a JSON object/],
  ['a header that is not UTF-8', fileWith(null, undefined, Uint8Array.from([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d])), /UTF-8/],
  ['an entry that is a number', fileWith({ a: 3 }), /"a"/],
  ['an entry that is null', fileWith({ a: null }), /"a"/],
  ['an unknown dtype', fileWith({ a: { dtype: 'Q8', shape: [1], data_offsets: [0, 1] } }, new Uint8Array(1)), /"a".*dtype/],
  ['the dtype "toString"', fileWith({ a: { dtype: 'toString', shape: [1], data_offsets: [0, 1] } }, new Uint8Array(1)), /"a".*dtype/],
  ['no dtype', fileWith({ a: { shape: [1], data_offsets: [0, 4] } }, new Uint8Array(4)), /"a".*dtype/],
  ['a shape that is a string', fileWith({ a: f32entry('2', [0, 8]) }, new Uint8Array(8)), /"a".*shape/],
  ['a negative shape', fileWith({ a: f32entry([-1], [0, 0]) }), /"a".*shape/],
  ['a fractional shape', fileWith({ a: f32entry([1.5], [0, 6]) }, new Uint8Array(6)), /"a".*shape/],
  ['a shape of 2^60 elements', fileWith({ a: f32entry([2 ** 30, 2 ** 30], [0, 4]) }, new Uint8Array(4)), /"a".*(bytes|shape)/],
  ['offsets past the end', fileWith({ a: f32entry([2], [0, 8]) }, new Uint8Array(4)), /"a".*outside/],
  ['offsets begin > end', fileWith({ a: f32entry([0], [4, 0]) }, new Uint8Array(4)), /"a".*outside/],
  ['negative offsets', fileWith({ a: f32entry([1], [-4, 0]) }, new Uint8Array(4)), /"a".*data_offsets/],
  ['three offsets', fileWith({ a: f32entry([1], [0, 4, 8]) }, new Uint8Array(8)), /"a".*data_offsets/],
  ['fractional offsets', fileWith({ a: f32entry([1], [0.5, 4.5]) }, new Uint8Array(8)), /"a".*data_offsets/],
  ['offsets past 2^53', fileWith(null, new Uint8Array(4), '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,18446744073709551616]}}'), /"a".*data_offsets/],
  ['shape x dtype not matching the byte range', fileWith({ a: f32entry([3], [0, 8]) }, new Uint8Array(8)), /"a".*needs 12 bytes/],
  ['overlapping entries', fileWith({ a: f32entry([2], [0, 8]), b: f32entry([2], [4, 12]) }, new Uint8Array(12)), /"a" and "b" overlap/],
  ['two entries on the same bytes', fileWith({ a: f32entry([1], [0, 4]), b: f32entry([1], [0, 4]) }, new Uint8Array(4)), /overlap/],
  ['duplicate names', fileWith(null, new Uint8Array(4), '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}'), /duplicate.*"a"/],
  ['duplicate __metadata__', fileWith(null, undefined, '{"__metadata__":{},"__metadata__":{}}'), /duplicate/],
  ['metadata with a number', fileWith({ __metadata__: { a: 1 } }), /__metadata__/],
  ['metadata that is an array', fileWith({ __metadata__: ['a'] }), /__metadata__/],
  ['an I64 value past int32', fileWith({ a: { dtype: 'I64', shape: [1], data_offsets: [0, 8] } }, new Uint8Array([0, 0, 0, 0, 1, 0, 0, 0])), /"a".*int32/],
  ['a truncated data section', serializeSafetensors({ w: Tensor.from(new Float32Array(16), [4, 4]) }).subarray(0, 100), /"w".*outside/],
  ['a truncated header', serializeSafetensors({ w: Tensor.from(new Float32Array(16), [4, 4]) }).subarray(0, 30), /header length/],
];

const fl1 = () => Tensor.zeros([1]);

function tempDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'nf-bad-'));
}

export function safetensorsCases(): Catalogue {
  const c = new Catalogue('safetensors');
  for (const [what, bytes, names] of hostileFiles)
    c.add(`parseSafetensors: ${what}`, 'ERR_NF_FORMAT', names, () => parseSafetensors(bytes));
  const dir = tempDir();
  const hostile = path.join(dir, 'hostile.safetensors');
  fs.writeFileSync(hostile, hostileFiles[2][1]);
  c.add('loadSafetensors: a hostile file', 'ERR_NF_FORMAT', /header length/, () => loadSafetensors(hostile));
  c.add('readSafetensorsMetadata: a hostile file', 'ERR_NF_FORMAT', /header length/, () => readSafetensorsMetadata(hostile));
  c.add('parseSafetensors(a string)', 'ERR_NF_INVALID_ARG', /for bytes/, () => parseSafetensors('abc' as unknown as Uint8Array));
  c.add('loadSafetensors(a missing file)', 'ERR_NF_INVALID_ARG', /path .*missing\.safetensors/, () => loadSafetensors(path.join(dir, 'missing.safetensors')));
  c.add('loadSafetensors(a directory)', 'ERR_NF_INVALID_ARG', /path /, () => loadSafetensors(dir));
  c.add('loadSafetensors(42)', 'ERR_NF_INVALID_ARG', /for path/, () => loadSafetensors(42 as unknown as string));
  c.add("saveSafetensors('')", 'ERR_NF_INVALID_ARG', /for path/, () => saveSafetensors('', {}));
  c.add('saveSafetensors into a missing folder', 'ERR_NF_INVALID_ARG', /path .*nowhere/, () => saveSafetensors(path.join(dir, 'nowhere', 'w.safetensors'), {}));
  c.add('saveSafetensors(record null)', 'ERR_NF_INVALID_ARG', /for record/, () => saveSafetensors(path.join(dir, 'w.safetensors'), null as never));
  c.add('serializeSafetensors(record with a number)', 'ERR_NF_INVALID_ARG', /record\["a"\]/, () => serializeSafetensors({ a: 1 as unknown as Tensor }));
  const gone = Tensor.zeros([2]);
  gone.dispose();
  c.add('serializeSafetensors(record with a disposed tensor)', 'ERR_NF_DISPOSED', /record\["a"\]/, () => serializeSafetensors({ a: gone }));
  c.add('serializeSafetensors(a tensor named __metadata__)', 'ERR_NF_INVALID_ARG', /__metadata__.*for record/, () => serializeSafetensors({ __metadata__: fl1() }));
  c.add('serializeSafetensors(metadata with a number)', 'ERR_NF_INVALID_ARG', /metadata\.v/, () => serializeSafetensors({}, { v: 1 as unknown as string }));
  c.add('serializeSafetensors(metadata null)', 'ERR_NF_INVALID_ARG', /for metadata/, () => serializeSafetensors({}, null as never));

  // Loading a file whose second entry does not fit leaves every weight as it was.
  const model = new Linear({ inFeatures: 3, outFeatures: 2, seed: 5 });
  const before = model.parameters().map((p) => p.toArray());
  const mismatched = path.join(dir, 'mismatched.safetensors');
  saveSafetensors(mismatched, { weight: Tensor.from(new Float32Array(6).fill(9), [2, 3]), bias: Tensor.from(new Float32Array(3).fill(9), [3]) });
  const unchanged = () => model.parameters().forEach((p, i) => expect(Array.from(p.toArray())).toEqual(Array.from(before[i])));
  c.add('loadStateDict(loadSafetensors(a file with a mis-shaped bias))', 'ERR_NF_STATE_DICT', /bias: shape \[3\]/,
    () => model.loadStateDict(loadSafetensors(mismatched)), unchanged);
  const truncated = path.join(dir, 'truncated.safetensors');
  fs.writeFileSync(truncated, fs.readFileSync(mismatched).subarray(0, fs.statSync(mismatched).size - 4));
  c.add('loadStateDict(loadSafetensors(a truncated file))', 'ERR_NF_FORMAT', /"weight"|"bias"/,
    () => model.loadStateDict(loadSafetensors(truncated)), unchanged);
  return c;
}
