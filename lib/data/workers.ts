/**
 * Starts a DataLoader worker thread (lib/data/decode_worker). From the compiled package it is
 * dist/cjs/data/decode_worker.js, next to this file. Run from the TypeScript sources (vitest, tsx)
 * there is only decode_worker.ts, which a worker cannot load by itself: the worker then registers
 * tsx's CommonJS hooks (a devDependency of the repository) before requiring it.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Worker } from 'node:worker_threads';

import { NodeformerError } from '../validation/errors';
import type { WorkerInit } from './decode_worker';

/** A worker thread running decode_worker with `init`. */
export function startDecodeWorker(init: WorkerInit): Worker {
  const compiled = path.join(__dirname, 'decode_worker.js');
  if (fs.existsSync(compiled)) return new Worker(compiled, { workerData: init });
  const source = path.join(__dirname, 'decode_worker.ts');
  let tsx: string | null = null;
  try {
    tsx = require.resolve('tsx/cjs/api');
  } catch {
    // reported below
  }
  if (!fs.existsSync(source) || tsx === null)
    throw new NodeformerError('ERR_NF_LOAD', `DataLoader cannot start its worker: neither ${compiled} nor ${source} with tsx ` +
      '(lib/data/decode_worker must stay a file next to lib/data/workers; bundlers must emit it as its own entry)');
  const code = `require(${JSON.stringify(tsx)}).register(); require(${JSON.stringify(source)});`;
  return new Worker(code, { eval: true, workerData: init });
}
