/**
 * Starts the service in this process on 127.0.0.1 and measures it: prediction latency and
 * throughput, /health latency during the load, and the event-loop delay of the HTTP thread.
 * Without --checkpoint it serves a randomly initialised ViTClassifier of the README's size
 * (28×28, patch 4, dModel 64, 3 blocks), which costs the same as a trained one.
 *
 *   npx tsx examples/server/loadtest.ts [--checkpoint FILE] [--requests 400] [--concurrency 16]
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parseArgs } from 'node:util';

import { ViTClassifier } from '../../lib/index';
import { startServer } from './app';
import { saveClassifier } from './checkpoint';
import { measureService, ringPng, type Latency } from './measure';

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { checkpoint: { type: 'string' }, requests: { type: 'string' }, concurrency: { type: 'string' } } });
  const requests = Number(values.requests ?? 400), concurrency = Number(values.concurrency ?? 16);
  if (!(Number.isInteger(requests) && requests > 0 && Number.isInteger(concurrency) && concurrency > 0))
    throw new Error('Expected positive integers for --requests and --concurrency');
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'nf-loadtest-'));
  try {
    let checkpoint = values.checkpoint;
    if (!checkpoint) {
      checkpoint = path.join(tmp, 'model.safetensors');
      const model = new ViTClassifier({ imgSize: 28, patchSize: 4, inChannels: 1, numClasses: 10, dModel: 64, numHeads: 4, dFF: 128, depth: 3, seed: 1 });
      saveClassifier(checkpoint, model);
      model.dispose();
    }
    const server = await startServer({ checkpoint });
    try {
      const png = ringPng();
      await measureService(server.url, { requests: 20, concurrency: 4, png }); // warm-up
      const m = await measureService(server.url, { requests, concurrency, png });
      const fmt = (l: Latency) => `p50 ${l.p50.toFixed(1)} ms, p99 ${l.p99.toFixed(1)} ms, max ${l.max.toFixed(1)} ms (${l.count} requests)`;
      console.log(`${requests} predictions, ${concurrency} in flight, ${m.seconds.toFixed(1)} s: ${m.predict.perSecond.toFixed(0)} images/s`);
      console.log(`  POST /predict  ${fmt(m.predict)}; statuses ${JSON.stringify(m.predict.statuses)}`);
      console.log(`  GET  /health   ${fmt(m.health)}`);
      console.log(`  event-loop delay p50 ${m.eventLoopDelay.p50.toFixed(1)} ms, p99 ${m.eventLoopDelay.p99.toFixed(1)} ms, max ${m.eventLoopDelay.max.toFixed(1)} ms`);
    } finally {
      await server.close();
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

main().catch((e: Error) => {
  console.error(e.message);
  process.exitCode = 1;
});
