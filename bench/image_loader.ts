/**
 * Image pipeline throughput: `npx tsx bench/image_loader.ts [--images 512] [--size 256]
 * [--image-size 64] [--batch-size 32] [--workers 1,2] [--epochs 2]`.
 *
 * Draws a folder of JPEGs (test/support/image_folder.ts; kept in the temp folder between runs),
 * then measures, per worker count, over whole epochs (worker start included):
 *   - decoded: images/s of the DataLoader alone (train transform: random resized crop, flip,
 *     normalisation), the batches only counted;
 *   - trained: images/s of the DataLoader feeding trainStepAsync of a small ViTClassifier, and
 *     the share of the time the loop waited for a batch;
 * and, for reference, the training step alone on one batch reused (no decoding at all).
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parseArgs } from 'node:util';

import { AdamW, type Batch, DataLoader, ImageFolder, native, trainStepAsync, ViTClassifier } from '../lib/index';
import { makeImageFolder } from '../test/support/image_folder';

const { values } = parseArgs({
  options: {
    images: { type: 'string', default: '512' },
    size: { type: 'string', default: '256' },
    'image-size': { type: 'string', default: '64' },
    'batch-size': { type: 'string', default: '32' },
    workers: { type: 'string', default: '1,2' },
    epochs: { type: 'string', default: '2' },
  },
});
const images = Number(values.images), size = Number(values.size), imageSize = Number(values['image-size']);
const batchSize = Number(values['batch-size']), epochs = Number(values.epochs), workerCounts = values.workers!.split(',').map(Number);
const CLASSES = 8;

function model(): ViTClassifier {
  return new ViTClassifier({ imgSize: imageSize, patchSize: 8, inChannels: 3, numClasses: CLASSES, dModel: 64, numHeads: 4, dFF: 128, depth: 4, seed: 1 });
}

async function main(): Promise<void> {
  const root = path.join(os.tmpdir(), `nf-bench-images-${images}-${size}`);
  if (!fs.existsSync(path.join(root, 'class-0'))) {
    const t0 = performance.now();
    await makeImageFolder(root, { classes: CLASSES, perClass: Math.ceil(images / CLASSES), size: [size, size], seed: 1 });
    console.log(`drew ${root} in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  }
  const ds = new ImageFolder(root, { imageSize, transform: 'train' });
  const bytes = ds.samples.reduce((n, s) => n + fs.statSync(s.path).size, 0);
  console.log(`${ds.length} JPEGs ${size}×${size} (${(bytes / ds.length / 1024).toFixed(1)} KiB each) → ${imageSize}×${imageSize}, batch ${batchSize}, ` +
    `${epochs} epochs per figure; ${os.cpus()[0].model}, ${os.availableParallelism()} cores, ${native.numThreads()} kernel threads, ${native.isaInfo().active}`);
  console.log('| workers | decoded (loader alone) | trained (loader + trainStepAsync) | waiting for data |');
  console.log('| ---: | ---: | ---: | ---: |');
  for (const workers of workerCounts) {
    const loader = new DataLoader(ds, { batchSize, shuffle: true, seed: 0, workers });
    let t0 = performance.now(), n = 0;
    for (let e = 0; e < epochs; e++) for await (const b of loader) (n += b.target.size), b.input.dispose();
    const decoded = n / ((performance.now() - t0) / 1000);

    const m = model(), opt = new AdamW(m.parameters(), { lr: 1e-3 });
    let waited = 0;
    n = 0;
    t0 = performance.now();
    for (let e = 0; e < epochs; e++) {
      const it = loader[Symbol.asyncIterator]();
      for (;;) {
        const w0 = performance.now();
        const next = await it.next();
        waited += performance.now() - w0;
        if (next.done) break;
        await trainStepAsync(m, opt, next.value.input, next.value.target);
        n += next.value.target.size;
      }
    }
    const total = performance.now() - t0;
    console.log(`| ${workers} | ${decoded.toFixed(0)} images/s | ${(n / (total / 1000)).toFixed(0)} images/s | ${((100 * waited) / total).toFixed(0)}% |`);
    m.dispose();
    opt.dispose();
  }
  const m = model(), opt = new AdamW(m.parameters(), { lr: 1e-3 });
  let batch!: Batch;
  for await (const b of new DataLoader(ds, { batchSize, workers: 1 })) {
    batch = b;
    break;
  }
  const steps = Math.ceil((epochs * ds.length) / batchSize);
  await trainStepAsync(m, opt, batch.input, batch.target);
  const t0 = performance.now();
  for (let s = 0; s < steps; s++) await trainStepAsync(m, opt, batch.input, batch.target);
  console.log(`training step alone (one batch reused, no decoding): ${((steps * batchSize) / ((performance.now() - t0) / 1000)).toFixed(0)} images/s`);
  m.dispose();
  opt.dispose();
}

void main();
