/**
 * Fuzzing the safetensors parser with fast-check. The property, for any input: parseSafetensors
 * either returns one entry per tensor of the header, each with data agreeing with its shape, or
 * throws NodeformerError ERR_NF_FORMAT — never another error, never a crash. Inputs: random bytes, headers built from
 * hostile pieces (odd names, dtypes, shapes, offsets and header lengths), and byte-level
 * mutations (flips, truncation, insertion) of valid files, which unmutated must round-trip.
 *
 * Every run first replays the corpus in test/fuzz-corpus/safetensors (ok-* files must parse,
 * bad-* files must be rejected, any other file must do one or the other), then fuzzes for
 * NF_FUZZ_MS milliseconds in all (default 3000; `npm run fuzz` runs a minute). With
 * NF_FUZZ_SAVE=1 a failing input is written into the corpus before the test fails, so a fixed bug
 * stays tested. NF_FUZZ_SEED fixes the seed (printed with every run) to replay a run.
 */
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';

import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';

import { NodeformerError } from '../lib/validation/errors';
import { parseSafetensors, serializeSafetensors } from '../lib/io/safetensors';
import { Tensor } from '../lib/core/tensor';

const CORPUS = path.join(__dirname, 'fuzz-corpus', 'safetensors');
const BUDGET_MS = Number(process.env.NF_FUZZ_MS ?? 3000);
const SAVE = process.env.NF_FUZZ_SAVE === '1';
const SEED = process.env.NF_FUZZ_SEED ? Number(process.env.NF_FUZZ_SEED) : Date.now() % 2 ** 31;
const ITEM: Record<string, number> = { F64: 8, F32: 4, F16: 2, BF16: 2, I64: 8, I32: 4, U8: 1, BOOL: 1 };

/** Parses `bytes`: 'ok' with every entry consistent, 'rejected' on ERR_NF_FORMAT; anything else throws. */
function outcome(bytes: Uint8Array): 'ok' | 'rejected' {
  let parsed;
  try {
    parsed = parseSafetensors(bytes);
  } catch (e) {
    if (e instanceof NodeformerError && e.code === 'ERR_NF_FORMAT') return 'rejected';
    throw e;
  }
  // Every tensor named in the header is an entry (none silently dropped, e.g. one named "__proto__").
  const headerLength = Number(new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true));
  const names = Object.keys(JSON.parse(Buffer.from(bytes.subarray(8, 8 + headerLength)).toString('utf8'))).filter((k) => k !== '__metadata__');
  if (Object.keys(parsed.entries).sort().join('\0') !== names.sort().join('\0')) throw new Error(`entries ${Object.keys(parsed.entries)} for header names ${names}`);
  for (const [name, e] of Object.entries(parsed.entries)) {
    const count = e.shape.reduce((a, b) => a * b, 1);
    if (e.data.length !== count) throw new Error(`entry ${JSON.stringify(name)}: ${e.data.length} values for shape [${e.shape}]`);
    if (!(e.dtype in ITEM)) throw new Error(`entry ${JSON.stringify(name)}: dtype ${e.dtype}`);
  }
  for (const v of Object.values(parsed.metadata)) if (typeof v !== 'string') throw new Error('metadata value not a string');
  return 'ok';
}

/** Writes a failing input into the corpus (only with NF_FUZZ_SAVE=1) and returns its name. */
function save(bytes: Uint8Array): string {
  const name = `found-${createHash('sha1').update(bytes).digest('hex').slice(0, 12)}.safetensors`;
  if (SAVE) fs.writeFileSync(path.join(CORPUS, name), bytes);
  return name;
}

let executions = 0, elapsed = 0;
afterAll(() => {
  console.log(`safetensors fuzz: ${executions} executions in ${(elapsed / 1000).toFixed(1)} s ` +
    `(${Math.round(executions / Math.max(elapsed / 1000, 1e-3))}/s), seed ${SEED}`);
});

/** Runs the parser property over `arb` for `ms`, counting executions; a failure is saved and reported. */
function fuzz(arb: fc.Arbitrary<Uint8Array>, ms: number): void {
  const start = performance.now();
  const details = fc.check(fc.property(arb, (bytes) => {
    executions++;
    outcome(bytes);
  }), { seed: SEED, numRuns: Number.MAX_SAFE_INTEGER, plugins: [fc.interruptAfterTimeLimit(ms)] });
  elapsed += performance.now() - start;
  if (details.failed) {
    const name = save((details.counterexample as [Uint8Array])[0]);
    throw new Error(`${fc.defaultReportMessage(details)}\n(input ${SAVE ? 'saved as' : 'would be saved as'} ${name})`);
  }
}

function file(header: Uint8Array, data: Uint8Array, length: bigint): Uint8Array {
  const out = new Uint8Array(8 + header.length + data.length);
  new DataView(out.buffer).setBigUint64(0, length, true);
  out.set(header, 8);
  out.set(data, 8 + header.length);
  return out;
}

const int = fc.oneof(fc.integer({ min: -2, max: 40 }), fc.constantFrom(2 ** 31, 2 ** 53, 2 ** 60, 1.5, -0, NaN), fc.nat());
const entry = fc.record({
  dtype: fc.oneof(fc.constantFrom(...Object.keys(ITEM)), fc.constantFrom('Q8', 'toString', '__proto__', 'constructor', ''), fc.anything()),
  shape: fc.oneof(fc.array(int, { maxLength: 4 }), fc.anything()),
  data_offsets: fc.oneof(fc.tuple(int, int), fc.array(int, { maxLength: 3 }), fc.anything()),
}, { requiredKeys: [] });
const name = fc.oneof(fc.string({ maxLength: 6 }), fc.constantFrom('__proto__', '__metadata__', 'constructor', 'a', 'a.weight'));
/** A header object made of hostile pieces, serialised (sometimes with a duplicated key), with data and a header length. */
const hostileFile = fc.tuple(
  fc.array(fc.tuple(name, fc.oneof(entry, fc.dictionary(fc.string({ maxLength: 3 }), fc.string({ maxLength: 3 })), fc.anything())), { maxLength: 5 }),
  fc.boolean(),
  fc.uint8Array({ maxLength: 96 }),
  fc.oneof(fc.constant(0n), fc.bigInt({ min: -8n, max: 8n }), fc.constantFrom(2n ** 63n, 2n ** 64n - 1n - 8n)),
).map(([pairs, duplicate, data, delta]) => {
  let json = `{${pairs.map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v ?? null)}`).join(',')}}`;
  if (duplicate && pairs.length) json = `{${JSON.stringify(pairs[0][0])}:1,${json.slice(1)}`;
  const header = Buffer.from(json);
  const length = BigInt(header.length) + delta;
  return file(header, data, length < 0n ? 0n : length % 2n ** 64n);
});

/** A valid file of a few random tensors, and a mutated copy of it. */
const tensors = fc.array(fc.tuple(fc.string({ minLength: 1, maxLength: 5 }), fc.constantFrom('float32', 'int32', 'bool'),
  fc.array(fc.integer({ min: 0, max: 4 }), { maxLength: 3 })), { maxLength: 4 });
const valid = tensors.map((list) => {
  const record: Record<string, Tensor> = Object.create(null);
  for (const [n, dtype, shape] of list) record[n] = Tensor.zeros(shape, dtype as 'float32');
  const bytes = serializeSafetensors(record);
  for (const t of Object.values(record)) t.dispose();
  return bytes;
});
const mutated = fc.tuple(valid, fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 }), fc.constantFrom('flip', 'cut', 'insert')), { minLength: 1, maxLength: 4 }))
  .map(([bytes, edits]) => {
    let b = bytes;
    for (const [at, v, kind] of edits) {
      const i = b.length ? at % b.length : 0;
      if (kind === 'flip' && b.length) (b = b.slice()), (b[i] = v);
      else if (kind === 'cut') b = b.subarray(0, i);
      else b = Uint8Array.from([...b.subarray(0, i), v, ...b.subarray(i)]);
    }
    return b;
  });

describe('safetensors fuzzing', () => {
  it('replays the corpus', () => {
    const files = fs.readdirSync(CORPUS).filter((f) => f.endsWith('.safetensors')).sort();
    expect(files.length).toBeGreaterThan(20);
    for (const f of files) {
      const got = outcome(fs.readFileSync(path.join(CORPUS, f)));
      if (f.startsWith('ok-')) expect(got, f).toBe('ok');
      if (f.startsWith('bad-')) expect(got, f).toBe('rejected');
    }
  });

  it('valid files round-trip', () => {
    fc.assert(fc.property(valid, (bytes) => {
      executions++;
      expect(outcome(bytes)).toBe('ok');
      expect(serializeSafetensors(Object.fromEntries(Object.entries(parseSafetensors(bytes).entries)
        .map(([n, e]) => [n, Tensor.from(e.data as Float32Array, e.shape)])))).toEqual(bytes);
    }), { seed: SEED, numRuns: 200 });
  });

  it('random bytes never crash the parser', () => {
    fuzz(fc.oneof(fc.uint8Array({ maxLength: 64 }),
      fc.tuple(fc.bigInt({ min: 0n, max: 80n }), fc.uint8Array({ maxLength: 96 })).map(([n, rest]) => file(rest, new Uint8Array(0), n))), BUDGET_MS / 3);
  });

  it('hostile headers never crash the parser', () => {
    fuzz(hostileFile, BUDGET_MS / 3);
  });

  it('mutated valid files never crash the parser', () => {
    fuzz(mutated, BUDGET_MS / 3);
  });
});
