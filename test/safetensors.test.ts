import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { describe, expect, it } from 'vitest';

import { loadSafetensors, parseSafetensors, readSafetensorsMetadata, saveSafetensors, serializeSafetensors } from '../lib/io/safetensors';
import { Tensor } from '../lib/core/tensor';

function fileWith(header: unknown, data = new Uint8Array(0), rawHeader?: string): Uint8Array {
  const json = Buffer.from(rawHeader ?? JSON.stringify(header));
  const out = new Uint8Array(8 + json.length + data.length);
  new DataView(out.buffer).setBigUint64(0, BigInt(json.length), true);
  out.set(json, 8);
  out.set(data, 8 + json.length);
  return out;
}

describe('safetensors', () => {
  it('round-trips tensors of every dtype with metadata, through a file written atomically', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nf-st-'));
    const file = path.join(dir, 'w.safetensors');
    const record = {
      'a.weight': Tensor.from(Float32Array.from([1.5, -2, 3.25, 0, 1e-20, -7]), [2, 3]),
      ids: Tensor.from(Int32Array.from([5, -1, 2 ** 31 - 1]), [3]),
      mask: Tensor.from(Uint8Array.from([1, 0, 1, 1]), [2, 2]),
      empty: Tensor.zeros([0, 4]),
    };
    saveSafetensors(file, record, { config: '{"dModel":3}' });
    expect(fs.readdirSync(dir)).toEqual(['w.safetensors']);
    const back = loadSafetensors(file);
    for (const [k, t] of Object.entries(record)) {
      expect(back[k].dtype).toBe(t.dtype);
      expect(back[k].shape).toEqual(t.shape);
      expect(Array.from(back[k].toArray())).toEqual(Array.from(t.toArray()));
    }
    expect(readSafetensorsMetadata(file)).toEqual({ config: '{"dModel":3}' });
    const bytes = fs.readFileSync(file);
    expect(Number(bytes.readBigUInt64LE(0)) % 8).toBe(0);
  });

  it('reads F64, F16, BF16 and I64 entries', () => {
    const data = new Uint8Array(8 + 2 + 2 + 8);
    const dv = new DataView(data.buffer);
    dv.setFloat64(0, 0.1, true);
    dv.setUint16(8, 0x3c00, true); // f16 1.0
    dv.setUint16(10, 0xc040, true); // bf16 -3.0
    dv.setBigInt64(12, -42n, true);
    const p = parseSafetensors(fileWith({
      d: { dtype: 'F64', shape: [1], data_offsets: [0, 8] },
      h: { dtype: 'F16', shape: [1], data_offsets: [8, 10] },
      b: { dtype: 'BF16', shape: [1], data_offsets: [10, 12] },
      i: { dtype: 'I64', shape: [], data_offsets: [12, 20] },
    }, data));
    expect(p.entries.d.data[0]).toBe(0.1);
    expect(p.entries.h.data[0]).toBe(1);
    expect(p.entries.b.data[0]).toBe(-3);
    expect(p.entries.i.data[0]).toBe(-42);
  });

  const hostile: [string, Uint8Array, RegExp][] = [
    ['too short', new Uint8Array(3), /too short/],
    ['huge header length', (() => { const b = new Uint8Array(16); new DataView(b.buffer).setBigUint64(0, 2n ** 60n, true); return b; })(), /header length/],
    ['invalid JSON', fileWith(null, undefined, '{"a": '), /not valid JSON/],
    ['not an object', fileWith([1, 2]), /not a JSON object/],
    ['unknown dtype', fileWith({ a: { dtype: 'Q8', shape: [1], data_offsets: [0, 1] } }, new Uint8Array(1)), /unsupported dtype/],
    ['offsets past the end', fileWith({ a: { dtype: 'F32', shape: [2], data_offsets: [0, 8] } }, new Uint8Array(4)), /outside/],
    ['shape x dtype mismatch', fileWith({ a: { dtype: 'F32', shape: [3], data_offsets: [0, 8] } }, new Uint8Array(8)), /needs 12 bytes/],
    ['overlapping', fileWith({ a: { dtype: 'F32', shape: [2], data_offsets: [0, 8] }, b: { dtype: 'F32', shape: [2], data_offsets: [4, 12] } }, new Uint8Array(12)), /overlap/],
    ['duplicate names', fileWith(null, new Uint8Array(4), '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}'), /duplicate/],
    ['negative shape', fileWith({ a: { dtype: 'F32', shape: [-1], data_offsets: [0, 0] } }), /shape/],
    ['bad metadata', fileWith({ __metadata__: { a: 1 } }), /__metadata__/],
  ];
  it.each(hostile)('rejects a file with %s', (_, bytes, message) => {
    let err: unknown;
    try {
      parseSafetensors(bytes);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toMatch(message);
    expect((err as { code: string }).code).toBe('ERR_NF_FORMAT');
  });

  it('serialises what it parses', () => {
    const t = { x: Tensor.from(Float32Array.from([1, 2, 3]), [3]) };
    const p = parseSafetensors(serializeSafetensors(t));
    expect(Array.from(p.entries.x.data)).toEqual([1, 2, 3]);
  });
});
