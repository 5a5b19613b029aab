/**
 * The bad-input catalogue: every public function and module of the package, and every raw op of
 * the addon, fed wrong ranks and dims, wrong dtypes, NaN and Inf, out-of-range token ids, images
 * that are not a multiple of the patch, masks of the wrong shape, disposed tensors, disposed
 * models, mismatched state dicts, hostile safetensors files, dims that overflow, unknown keys in
 * config and options objects, and a new user's first mistakes (a batch of zero, a PNG given as a
 * checkpoint and a checkpoint as a PNG). Each case must fail with a JS Error that has a stable
 * `code` and a message naming the argument — and the process must survive all of them. The
 * number of cases is printed.
 */
import { afterAll, describe, expect, it } from 'vitest';

import type { BadCase } from './bad_input/case';
import { facadeCases } from './bad_input/facade';
import { firstUseCases } from './bad_input/first_use';
import { nativeOpCases } from './bad_input/native_ops';
import { safetensorsCases } from './bad_input/safetensors_files';
import { unknownKeyCases } from './bad_input/unknown_keys';

const catalogues = [facadeCases(), nativeOpCases(), safetensorsCases(), unknownKeyCases(), firstUseCases()];
const all: BadCase[] = catalogues.flatMap((c) => c.cases);

async function failure(run: () => unknown): Promise<unknown> {
  try {
    await run();
  } catch (e) {
    return e;
  }
  return undefined;
}

afterAll(() => {
  console.log(`bad-input catalogue: ${all.length} cases (${catalogues.map((c) => `${c.prefix} ${c.cases.length}`).join(', ')})`);
});

describe('bad input', () => {
  it.each(all.map((c) => [c.title, c] as const))('%s', async (_, c) => {
    const e = await failure(c.run);
    expect(e, 'the call did not throw').toBeInstanceOf(Error);
    expect((e as { code?: unknown }).code).toBe(c.code);
    expect((e as Error).message).toMatch(c.names);
    c.after?.();
  });
});
