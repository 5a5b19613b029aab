/**
 * Writes a TensorBoard run with every kind of record the SummaryWriter makes, and the values it
 * wrote, for scripts/verify_tensorboard.py to check with TensorBoard's own reader:
 *   npx tsx scripts/tensorboard_demo_run.ts <logdir>
 * <logdir>/records: scalars (a loss-like curve and a sine), addScalars, two PNG images (RGB and
 *   grey), histograms of a drifting distribution, text, and an hparams session (<logdir>/records/session);
 * <logdir>/fit: a short fit() of a small ViT with the tensorBoard callback (histograms on);
 * <logdir>/expected.json: every value written.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

import { PNG } from 'pngjs';

import { AdamW, fit, SummaryWriter, Tensor, tensorBoard, ViTClassifier, type Batch } from '../lib';
import { mulberry32 } from '../lib/core/random';

/** Standard normals (Box-Muller) from a seeded generator. */
function normals(n: number, rand: () => number, mean: number, std: number): Float32Array {
  return Float32Array.from({ length: n }, () => mean + std * Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand()));
}

/** A PNG of `width`×`height`: an RGB colour gradient, or a grey ring. */
function picture(width: number, height: number, grey: boolean): Uint8Array {
  const png = new PNG({ width, height, colorType: grey ? 0 : 2, inputColorType: 6, inputHasAlpha: true });
  for (let y = 0; y < height; y++)
    for (let x = 0; x < width; x++) {
      const i = 4 * (y * width + x), r = Math.hypot(x - width / 2, y - height / 2) / (height / 2);
      const v = grey ? Math.round(255 * Math.abs(Math.sin(4 * r))) : 0;
      png.data.set(grey ? [v, v, v, 255] : [Math.round((255 * x) / width), Math.round((255 * y) / height), 160, 255], i);
    }
  return PNG.sync.write(png, { colorType: grey ? 0 : 2, inputColorType: 6 });
}

/** Records of every kind; returns what was written. */
async function records(logdir: string) {
  const w = new SummaryWriter(logdir);
  const rand = mulberry32(1);
  const scalars: Record<string, [number, number][]> = { 'demo/loss': [], 'demo/sine': [] };
  for (let s = 0; s < 60; s++) {
    scalars['demo/loss'].push([s, 2 * Math.exp(-s / 15) + 0.1 * rand()]);
    scalars['demo/sine'].push([s, Math.sin(s / 5)]);
  }
  for (const [tag, points] of Object.entries(scalars)) for (const [s, v] of points) w.addScalar(tag, v, s);
  const multi: Record<string, [number, number][]> = { train: [], valid: [] };
  for (let s = 0; s < 20; s++) {
    const values = { train: 1 / (1 + s), valid: 1.2 / (1 + 0.8 * s) };
    w.addScalars('demo/pair', values, s);
    multi.train.push([s, values.train]);
    multi.valid.push([s, values.valid]);
  }
  const images = [{ tag: 'demo/gradient', png: picture(96, 64, false), width: 96, height: 64, step: 3 },
    { tag: 'demo/rings', png: picture(50, 50, true), width: 50, height: 50, step: 4 }];
  for (const im of images) w.addImage(im.tag, im.png, im.step);
  const histograms: { step: number; values: number[] }[] = [];
  for (let s = 0; s < 10; s++) {
    const values = normals(1000 + 37 * s, rand, s / 4, 1 + s / 10);
    w.addHistogram('demo/drift', values, s);
    histograms.push({ step: s, values: Array.from(values) });
  }
  const texts = [{ tag: 'demo/notes', text: '# nodeformer\nA **Markdown** note: *ünïcode* ✓', step: 2 }];
  for (const t of texts) w.addText(t.tag, t.text, t.step);
  const hparams = { lr: 0.003, optimizer: 'adamw', warmup: true, depth: 4 }, metrics = { 'hparam/accuracy': 0.875, 'hparam/loss': 0.42 };
  w.addHparams(hparams, metrics, { runName: 'session' });
  await w.close();
  return { scalars, scalarsMulti: { main: 'demo/pair', runs: multi }, images: images.map((im) => ({ ...im, png: Buffer.from(im.png).toString('base64') })),
    histograms, texts, hparams: { run: 'session', hparams, metrics } };
}

/** A short fit() with the tensorBoard callback; returns its history. */
async function training(logdir: string) {
  const rand = mulberry32(2), batches: Batch[] = [];
  for (let b = 0; b < 6; b++) {
    const y = Int32Array.from({ length: 16 }, () => Math.floor(rand() * 3));
    const x = normals(16 * 64, rand, 0, 0.5);
    y.forEach((c, i) => { for (let p = c * 16; p < c * 16 + 24; p++) x[i * 64 + p] += 1.5; });
    batches.push({ input: Tensor.from(x, [16, 1, 8, 8]), target: Tensor.from(y, [16]) });
  }
  const model = new ViTClassifier({ imgSize: 8, patchSize: 4, inChannels: 1, numClasses: 3, dModel: 16, numHeads: 2, dFF: 32, depth: 2 });
  const history = await fit(model, new AdamW(model.parameters(), { lr: 3e-3 }), batches.slice(0, 5), {
    epochs: 8, validation: batches.slice(5), callbacks: [tensorBoard(logdir, { histograms: true })],
  });
  const parameters = model.namedParameters().map(([name]) => name);
  model.dispose();
  return { history, parameters };
}

async function main(): Promise<void> {
  const logdir = process.argv[2];
  if (!logdir) throw new Error('usage: npx tsx scripts/tensorboard_demo_run.ts <logdir>');
  fs.rmSync(logdir, { recursive: true, force: true });
  const expected = { records: await records(path.join(logdir, 'records')), fit: await training(path.join(logdir, 'fit')) };
  fs.writeFileSync(path.join(logdir, 'expected.json'), JSON.stringify(expected));
  console.log(`wrote ${logdir}/records, ${logdir}/fit and ${logdir}/expected.json`);
}

void main();
