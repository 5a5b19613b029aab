/**
 * Loads a model-level fixture written by scripts/make_fixtures.py (format: test/fixtures/README.md)
 * and builds tensors from it.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

import { parseSafetensors, type RawEntry } from '../lib/io/safetensors';
import { Tensor } from '../lib/core/tensor';

export interface Fixture {
  module: string;
  config: Record<string, unknown>;
  forward: Record<string, unknown>;
  training: Record<string, unknown> | null;
  /** every __metadata__ string as stored */
  metaRaw: Record<string, string>;
  /** parameters by state-dict name (float32) */
  params: Record<string, Float32Array>;
  entries: Record<string, RawEntry>;
  /** input.<name> as a Tensor (floats, int32 ids, bool masks) */
  input(name: string): Tensor;
  /** output.<name>, grad.<name>, final.<name>: float64 reference values */
  f64(key: string): Float64Array;
  has(key: string): boolean;
  /** the mask named by forward[option], as a bool Tensor, or undefined */
  mask(option: string): Tensor<'bool'> | undefined;
}

export function loadFixture(name: string): Fixture {
  const file = path.join(__dirname, 'fixtures', `${name}.safetensors`);
  const { entries, metadata } = parseSafetensors(fs.readFileSync(file));
  const params: Record<string, Float32Array> = {};
  for (const [k, e] of Object.entries(entries)) if (k.startsWith('param.')) params[k.slice(6)] = e.data as Float32Array;
  const forward = JSON.parse(metadata.forward ?? '{}') as Record<string, unknown>;
  const get = (key: string) => {
    const e = entries[key];
    if (!e) throw new Error(`fixture ${name} has no ${key}`);
    return e;
  };
  const input = (n: string) => {
    const e = get(`input.${n}`);
    return Tensor.from(e.data instanceof Float64Array ? Float32Array.from(e.data) : e.data, e.shape);
  };
  return {
    module: metadata.module,
    config: JSON.parse(metadata.config ?? '{}'),
    forward,
    training: metadata.training ? JSON.parse(metadata.training) : null,
    metaRaw: metadata,
    params,
    entries,
    input,
    f64: (key) => Float64Array.from(get(key).data),
    has: (key) => key in entries,
    mask: (option) => {
      const key = forward[option];
      return typeof key === 'string' ? (input(key.replace(/^input\./, '')) as Tensor<'bool'>) : undefined;
    },
  };
}
