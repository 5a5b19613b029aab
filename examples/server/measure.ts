/**
 * Load measurement for the service: `requests` predictions with `concurrency` in flight (sent
 * from a worker thread) while this thread polls /health and records its own event-loop delay,
 * which is the server's when the server runs on this thread (loadtest.ts and the tests).
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';

import { PNG } from 'pngjs';

/** Latencies in milliseconds. */
export interface Latency {
  count: number;
  p50: number;
  p99: number;
  max: number;
}

export interface Measurement {
  predict: Latency & { perSecond: number; statuses: Record<number, number> };
  health: Latency;
  eventLoopDelay: { p50: number; p99: number; max: number };
  seconds: number;
}

function latency(ms: number[]): Latency {
  const s = [...ms].sort((a, b) => a - b);
  const q = (p: number) => (s.length ? s[Math.min(s.length - 1, Math.floor(p * s.length))] : NaN);
  return { count: s.length, p50: q(0.5), p99: q(0.99), max: s.length ? s[s.length - 1] : NaN };
}

/** A size × size grayscale PNG of a bright ring on black (a digit "0" stand-in). */
export function ringPng(size = 28): Buffer {
  const png = new PNG({ width: size, height: size, colorType: 0, inputColorType: 0, bitDepth: 8 });
  const c = (size - 1) / 2, r = size * 0.3;
  for (let y = 0; y < size; y++)
    for (let x = 0; x < size; x++) png.data[y * size + x] = Math.abs(Math.hypot(x - c, y - c) - r) < size / 14 ? 255 : 0;
  return PNG.sync.write(png, { colorType: 0, inputColorType: 0, bitDepth: 8 });
}

/** A /predict answer: a prediction, or an error. */
export interface PredictBody {
  label?: number;
  probabilities?: number[];
  error?: { code: string; message: string };
}

/** Posts `png` to `${url}/predict`; returns the status and the parsed JSON body. */
export async function postPng(url: string, png: Uint8Array): Promise<{ status: number; body: PredictBody }> {
  const res = await fetch(`${url}/predict`, { method: 'POST', headers: { 'content-type': 'image/png' }, body: png });
  return { status: res.status, body: (await res.json()) as PredictBody };
}

/**
 * The load generator, run in its own thread so that the client's work (fetch, JSON) does not
 * land on the event loop being measured: `requests` POSTs of `png`, `concurrency` at a time.
 * Plain JavaScript, so the thread needs no TypeScript loader.
 */
const LOAD_CLIENT = `
const { parentPort, workerData: { url, png, requests, concurrency } } = require('node:worker_threads');
const ms = [], statuses = {};
let next = 0;
async function client() {
  while (next < requests) {
    next++;
    const t0 = performance.now();
    const res = await fetch(url + '/predict', { method: 'POST', headers: { 'content-type': 'image/png' }, body: png });
    await res.arrayBuffer();
    ms.push(performance.now() - t0);
    statuses[res.status] = (statuses[res.status] || 0) + 1;
  }
}
Promise.all(Array.from({ length: concurrency }, client)).then(() => parentPort.postMessage({ ms, statuses }));
`;

/**
 * Runs the load (in a worker thread) and, on this thread, polls /health and records the
 * event-loop delay until it ends.
 */
export async function measureService(url: string, options: { requests: number; concurrency: number; png: Uint8Array }): Promise<Measurement> {
  const healthMs: number[] = [];
  const loop = monitorEventLoopDelay({ resolution: 1 });
  let done = false;
  const start = performance.now();
  loop.enable();
  const load = new Promise<{ ms: number[]; statuses: Record<number, number> }>((resolve, reject) => {
    const w = new Worker(LOAD_CLIENT, { eval: true, workerData: { url, png: options.png, requests: options.requests, concurrency: options.concurrency } });
    w.once('message', resolve);
    w.once('error', reject);
    w.once('exit', (code) => reject(new Error(`the load worker exited (code ${code})`)));
  });
  const poll = async () => {
    while (!done) {
      const t0 = performance.now();
      await (await fetch(`${url}/health`)).json();
      healthMs.push(performance.now() - t0);
      await new Promise((r) => setTimeout(r, 10));
    }
  };
  const polling = poll();
  const result = await load.finally(() => (done = true));
  await polling;
  loop.disable();
  const seconds = (performance.now() - start) / 1000;
  const ms = (ns: number) => ns / 1e6;
  return {
    predict: { ...latency(result.ms), perSecond: options.requests / seconds, statuses: result.statuses },
    health: latency(healthMs),
    eventLoopDelay: { p50: ms(loop.percentile(50)), p99: ms(loop.percentile(99)), max: ms(loop.max) },
    seconds,
  };
}
