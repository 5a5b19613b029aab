/** Reading the fixtures of scripts/gen_pretrained_fixtures.py (test/fixtures/pretrained/) and comparing with them. */
import * as fs from 'node:fs';
import * as path from 'node:path';

import { parseSafetensors, type RawEntry } from '../../lib/io/safetensors';
import { Tensor } from '../../lib/core/tensor';

export const PRETRAINED = path.join(__dirname, '..', 'fixtures', 'pretrained');

/** A fixture's tensors and metadata (io.safetensors of a model folder, or a standalone file). */
export interface PretrainedIo {
  metadata: Record<string, string>;
  entries: Record<string, RawEntry>;
  /** input.<name> as a float32 / int32 tensor. */
  input(name: string): Tensor;
  /** A reference value (float64 outputs and gradients, float32 otherwise) as float64. */
  ref(key: string): Float64Array;
}

export function readIo(file: string): PretrainedIo {
  const { entries, metadata } = parseSafetensors(fs.readFileSync(path.join(PRETRAINED, file)));
  const get = (key: string) => {
    const e = entries[key];
    if (!e) throw new Error(`${file} has no ${key}`);
    return e;
  };
  return {
    metadata, entries,
    input: (name) => {
      const e = get(`input.${name}`);
      return Tensor.from(e.data as Float32Array | Int32Array, e.shape);
    },
    ref: (key) => Float64Array.from(get(key).data as ArrayLike<number>),
  };
}

/** max |got − ref| / max(1, max |ref|): absolute error for values up to 1, relative beyond. */
export function maxErr(got: ArrayLike<number>, ref: ArrayLike<number>): number {
  if (got.length !== ref.length) throw new Error(`length mismatch: ${got.length} vs ${ref.length}`);
  let err = 0, scale = 1;
  for (let i = 0; i < ref.length; i++) {
    err = Math.max(err, Math.abs(got[i] - ref[i]));
    scale = Math.max(scale, Math.abs(ref[i]));
  }
  return Number.isNaN(err) ? Infinity : err / scale;
}
