/**
 * The HTTP thread's handle on the inference worker: a bounded queue of posted PNGs, sent to the
 * worker in batches (up to maxBatch per forward) whenever it is idle, so concurrent requests share
 * forwards instead of waiting for one another one by one.
 */
import * as path from 'node:path';
import { Worker } from 'node:worker_threads';

import { HttpError } from './http_error';
import type { FromWorker, ModelInfo, Prediction, Refusal, ToWorker, WorkerInit } from './protocol';

interface Pending {
  id: number;
  png: Uint8Array;
  resolve: (r: Prediction | Refusal) => void;
  reject: (e: Error) => void;
}

/**
 * Runs worker.ts in a worker thread. The examples are TypeScript run by tsx, so the thread first
 * registers tsx's loader (a no-op cost when the parent already runs under tsx).
 */
function spawn(init: WorkerInit): Worker {
  const tsx = require.resolve('tsx/cjs/api');
  const file = path.join(__dirname, 'worker.ts');
  const code = `require(${JSON.stringify(tsx)}).register(); require(${JSON.stringify(file)});`;
  return new Worker(code, { eval: true, workerData: init });
}

export class Inference {
  /** Resolves with the model once the worker has loaded it; rejects if it cannot. */
  readonly ready: Promise<ModelInfo>;
  private readonly worker: Worker;
  private readonly queue: Pending[] = [];
  private inFlight = new Map<number, Pending>();
  private nextId = 1;
  private failure: Error | null = null;

  constructor(checkpoint: string, private readonly limits: { maxBatch: number; maxQueue: number }) {
    this.worker = spawn({ checkpoint });
    this.ready = new Promise((resolve, reject) => {
      this.worker.on('message', (msg: FromWorker) => {
        if (msg.type === 'ready') resolve(msg.model);
        else this.settle(msg.results);
      });
      this.worker.on('error', (e) => {
        reject(e);
        this.fail(e);
      });
      this.worker.on('exit', (code) => {
        const e = new Error(`the inference worker exited (code ${code})`);
        reject(e);
        this.fail(e);
      });
    });
  }

  /** Images waiting for the worker, and images it is working on. */
  get load(): { queued: number; inFlight: number } {
    return { queued: this.queue.length, inFlight: this.inFlight.size };
  }

  /** Why the worker is gone, or null while it runs. */
  get error(): Error | null {
    return this.failure;
  }

  /** Classifies one PNG; rejects with a 503 HttpError when the queue is full or the worker is gone. */
  predict(png: Uint8Array): Promise<Prediction | Refusal> {
    if (this.failure) return Promise.reject(new HttpError(503, 'unavailable', `The model is unavailable: ${this.failure.message}`));
    if (this.queue.length >= this.limits.maxQueue)
      return Promise.reject(new HttpError(503, 'overloaded', `Expected at most ${this.limits.maxQueue} queued images but the queue is full; retry later`));
    return new Promise((resolve, reject) => {
      this.queue.push({ id: this.nextId++, png, resolve, reject });
      this.pump();
    });
  }

  /** Stops the worker; pending predictions reject. */
  async close(): Promise<void> {
    this.fail(new Error('the server is closing'));
    await this.worker.terminate();
  }

  private pump(): void {
    if (this.inFlight.size > 0 || this.queue.length === 0 || this.failure) return;
    const batch = this.queue.splice(0, this.limits.maxBatch);
    for (const p of batch) this.inFlight.set(p.id, p);
    const msg: ToWorker = { type: 'predict', items: batch.map(({ id, png }) => ({ id, png })) };
    this.worker.postMessage(msg);
  }

  private settle(results: (Prediction | Refusal)[]): void {
    for (const r of results) {
      this.inFlight.get(r.id)?.resolve(r);
      this.inFlight.delete(r.id);
    }
    this.pump();
  }

  private fail(e: Error): void {
    this.failure ??= e;
    const err = new HttpError(503, 'unavailable', `The model is unavailable: ${this.failure.message}`);
    for (const p of [...this.inFlight.values(), ...this.queue.splice(0)]) p.reject(err);
    this.inFlight.clear();
  }
}
