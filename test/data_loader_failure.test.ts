/**
 * A DataLoader whose workers cannot start (here: sharp's path made wrong) fails its iteration with
 * ERR_NF_LOAD saying why, for the batch awaited and every later one (none waits forever), and
 * leaves no thread behind.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { afterAll, describe, expect, it, vi } from 'vitest';

import { DataLoader, ImageFolder, NodeformerError } from '../lib/index';
import { makeImageFolder, threadCount } from './support/image_folder';

vi.mock('../lib/core/optional', async (importOriginal) => {
  const original = await importOriginal<typeof import('../lib/core/optional')>();
  return { ...original, resolveOptional: (name: string) => (name === 'sharp' ? '/nonexistent/sharp.js' : original.resolveOptional(name)) };
});

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'nf-loader-fail-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

describe('DataLoader worker failure', () => {
  it('rejects with the worker\'s error and terminates the others', async () => {
    const root = await makeImageFolder(tmp, { classes: 2, perClass: 5, size: [12, 10] });
    const ds = new ImageFolder(root, { imageSize: 4 });
    const threads = threadCount();
    for (const workers of [1, 3]) {
      let err: unknown;
      try {
        for await (const batch of new DataLoader(ds, { batchSize: 2, workers, prefetch: 1 })) batch.input.dispose();
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(NodeformerError);
      expect((err as NodeformerError).code).toBe('ERR_NF_LOAD');
      expect((err as Error).message).toMatch(/A DataLoader worker failed: Cannot find module '\/nonexistent\/sharp\.js'/);
    }
    expect(threadCount()).toBeLessThanOrEqual(threads);
  });
});
