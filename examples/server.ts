/**
 * HTTP service example: classifies posted PNG digits with a ViTClassifier checkpoint (the demo's
 * model.safetensors), using only node:http. The forward pass runs in a worker thread.
 *
 *   npm run example:server -- --checkpoint out/model.safetensors [--port 3000] [--host 127.0.0.1]
 *   curl --data-binary @digit.png http://127.0.0.1:3000/predict
 */
import { parseArgs } from 'node:util';

import { startServer } from './server/app';

const HELP = `Usage: npm run example:server -- --checkpoint FILE [options]

Serves a ViTClassifier checkpoint over HTTP:
  POST /predict   body: a PNG digit (28×28 grayscale, white on black; other sizes are resampled)
                  → {"label": 7, "probabilities": [...]}
  GET  /health    → {"status": "ok", "model": {...}, "queued": 0, "inFlight": 0, "uptimeSeconds": 12}

Options:
  --checkpoint FILE   safetensors file with {module: 'ViTClassifier', config} metadata (required)
  --port N            port (default 3000; 0 = any free port)
  --host ADDR         interface (default 127.0.0.1)
  -h, --help          this text`;

async function main(): Promise<void> {
  const { values } = parseArgs({ options: {
    checkpoint: { type: 'string' }, port: { type: 'string' }, host: { type: 'string' }, help: { type: 'boolean', short: 'h' },
  } });
  if (values.help) return console.log(HELP);
  if (!values.checkpoint) throw new Error(`Expected --checkpoint FILE but received none\n\n${HELP}`);
  const port = Number(values.port ?? 3000);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`Expected a port in [0, 65535] for --port but received ${JSON.stringify(values.port)}`);
  const running = await startServer({ checkpoint: values.checkpoint, port, host: values.host ?? '127.0.0.1' });
  const m = running.model;
  console.log(`ViTClassifier (${m.parameters} parameters, ${m.imgSize}×${m.imgSize}×${m.inChannels} → ${m.numClasses} classes) ` +
    `listening on ${running.url}\n  curl --data-binary @digit.png ${running.url}/predict`);
  const stop = () => {
    console.log('closing');
    void running.close();
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

main().catch((e: Error) => {
  console.error(e.message);
  process.exitCode = 1;
});
