/**
 * `nodeformer train --data <folder>` on a small folder the test draws (3 classes × 8 JPEGs of
 * shapes of distinct colours), two epochs of a small model on fit() with --logdir (the epoch lines,
 * TensorBoard's records, the best epoch kept), then `predict` on JPEG, PNG and WebP files with the
 * written checkpoint (class names from its metadata), `predict` of a JPEG digit with a digit
 * model, and the usage errors of both.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { readSafetensorsMetadata, saveModel, ViTClassifier } from '../lib/index';
import { makeImageFolder } from './support/image_folder';
import { runCli as run } from './support/run_cli';
import { readEvents } from './support/tfrecord_reader';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'nf-cli-data-'));
let root = '';
beforeAll(async () => {
  root = await makeImageFolder(path.join(tmp, 'shapes'), { classes: 3, perClass: 8, size: (i) => [40 + 3 * i, 56 - 2 * i], seed: 9 });
});
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

describe('nodeformer train --data', () => {
  it('trains on an image folder with --logdir, keeps the best epoch with its classes, and predicts any image format with it', async () => {
    const out = path.join(tmp, 'run'), logdir = path.join(tmp, 'runs');
    const t0 = performance.now();
    const r = await run('train', '--data', root, '--epochs', '2', '--image-size', '16', '--batch-size', '6', '--val-split', '0.25',
      '--workers', '1', '--lr', '0.003', '--out', out, '--logdir', logdir);
    expect(r.status, r.stderr).toBe(0);
    expect(r.out).toMatch(/on 18 images of 3 classes \(class-0, class-1, class-2\) from .*shapes, validating on 6; 1 decoding worker; /);
    const epochLines = r.out.split('\n').filter((l) => l.startsWith('epoch '));
    expect(epochLines).toHaveLength(2);
    for (const l of epochLines)
      expect(l).toMatch(/^epoch [12]\/2 {2}train loss [\d.]+ acc [\d.]+% {2}\| {2}validation loss [\d.]+ acc [\d.]+% {2}\| {2}\d+ img\/s$/);
    console.log(`train --data: ${((performance.now() - t0) / 1000).toFixed(1)} s\n${r.out}`);

    // TensorBoard: the epoch's numbers as the lines show them, and the hparams of the kept epoch.
    const file = fs.readdirSync(logdir).find((f) => f.startsWith('events.out.tfevents.'))!;
    const ev = readEvents(fs.readFileSync(path.join(logdir, file)));
    const scalars = (tag: string) => ev.filter((e) => e.values[0]?.tag === tag).map((e) => [e.step, e.values[0].simpleValue!]);
    for (const tag of ['loss/train', 'loss/validation', 'accuracy/train', 'accuracy/validation', 'learning_rate', 'throughput/samples_per_second'])
      expect(scalars(tag).map(([step]) => step), tag).toEqual([1, 2]);
    const valLoss = scalars('loss/validation').map(([, v]) => v);
    expect(epochLines.map((l) => /validation loss ([\d.]+)/.exec(l)![1])).toEqual(valLoss.map((v) => v.toFixed(4)));
    const best = valLoss[1] < valLoss[0] ? 2 : 1;
    expect(r.out).toContain(`Wrote ${path.join(out, 'model.safetensors')}: the model of epoch ${best} (the lowest validation loss, validation accuracy `);
    expect(r.out).toContain(`TensorBoard logs in ${logdir}`);
    const hp = readEvents(fs.readFileSync(path.join(logdir, 'hparams', fs.readdirSync(path.join(logdir, 'hparams'))[0])));
    expect(hp.flatMap((e) => e.values.map((v) => v.tag))).toEqual(['_hparams_/experiment', '_hparams_/session_start_info',
      '_hparams_/session_end_info', 'hparam/validation_accuracy', 'hparam/validation_loss']);
    expect(hp.find((e) => e.values[0]?.tag === 'hparam/validation_loss')!.values[0].simpleValue).toBeCloseTo(valLoss[best - 1], 5);
    const checkpoint = path.join(out, 'model.safetensors');
    const meta = readSafetensorsMetadata(checkpoint);
    expect(JSON.parse(meta.classes)).toEqual(['class-0', 'class-1', 'class-2']);
    expect(JSON.parse(meta.transform)).toMatchObject({ imageSize: 16, cropFraction: 0.875 });
    const model = ViTClassifier.load(checkpoint);
    expect(model.config).toMatchObject({ imgSize: 16, inChannels: 3, numClasses: 3, patchSize: 8 });
    model.dispose();

    const jpg = path.join(root, 'class-2', '0001.jpg');
    const png = path.join(tmp, 'copy.png'), webp = path.join(tmp, 'copy.webp');
    await sharp(jpg).png().toFile(png);
    await sharp(jpg).webp().toFile(webp);
    const p = await run('predict', jpg, png, webp, '--model', checkpoint);
    expect(p.status, p.stderr).toBe(0);
    const lines = p.out.split('\n');
    expect(lines).toHaveLength(3);
    lines.forEach((l, i) => expect(l).toMatch(new RegExp(`^${[jpg, png, webp][i].replace(/[.]/g, '\\.')}: class-[012] \\(\\d+\\.\\d%\\)$`)));

    const evalFolder = await run('eval', '--model', checkpoint);
    expect(evalFolder.status).toBe(2);
    expect(evalFolder.stderr).toContain('was trained on an image folder (classes class-0, class-1, class-2); eval tests digit models');

    const notImage = await run('predict', checkpoint, '--model', checkpoint);
    expect(notImage.status).toBe(2);
    expect(notImage.stderr).toMatch(/Cannot load the image .*model\.safetensors: .* \(expected PNG, JPEG, WebP/);
    const missing = await run('predict', path.join(tmp, 'nope.jpg'), '--model', checkpoint);
    expect(missing.status).toBe(2);
    expect(missing.stderr).toContain('nope.jpg: no such file');
  });

  it('predicts a JPEG digit with the digit model, and rejects bad --data runs with exit status 2', async () => {
    const digitModel = path.join(tmp, 'digits.safetensors');
    const m = new ViTClassifier({ imgSize: 28, patchSize: 7, inChannels: 1, numClasses: 10, dModel: 16, numHeads: 2, dFF: 32, depth: 1, seed: 3 });
    saveModel(digitModel, m);
    m.dispose();
    const digit = path.join(tmp, 'digit.jpg');
    await sharp({ create: { width: 40, height: 30, channels: 3, background: '#ffffff' } })
      .composite([{ input: Buffer.from('<svg width="40" height="30"><rect x="17" y="4" width="6" height="22" fill="black"/></svg>') }])
      .jpeg().toFile(digit);
    const r = await run('predict', digit, '--model', digitModel);
    expect(r.status, r.stderr).toBe(0);
    expect(r.out).toMatch(/digit\.jpg: \d \(\d+\.\d%\)$/);
    const garbage = path.join(tmp, 'garbage.jpg');
    fs.writeFileSync(garbage, 'hello');
    const g = await run('predict', garbage, '--model', digitModel);
    expect(g.status).toBe(2);
    expect(g.stderr).toMatch(/Expected an image \(PNG, JPEG, .*\) for .*garbage\.jpg but received 5 bytes that do not decode/);

    const noFolder = await run('train', '--data', path.join(tmp, 'no-such-folder'), '--out', path.join(tmp, 'x'));
    expect(noFolder.status).toBe(2);
    expect(noFolder.stderr).toMatch(/--data .*no-such-folder: Expected a folder of class folders/);
    const badSize = await run('train', '--data', root, '--image-size', '12');
    expect(badSize.status).toBe(2);
    expect(badSize.stderr).toContain('multiple of the patch size 8');
    const badSplit = await run('train', '--data', root, '--val-split', '1');
    expect(badSplit.status).toBe(2);
    expect(badSplit.stderr).toMatch(/--val-split.* is invalid/);
    const folderFlags = await run('train', '--val-split', '0.2', '--workers', '2');
    expect(folderFlags.status).toBe(2);
    expect(folderFlags.stderr).toContain('error: --val-split, --workers are for training on an image folder: add --data <folder>, or leave them out');
    const mnistFlag = await run('train', '--data', root, '--train-size', '100');
    expect(mnistFlag.status).toBe(2);
    expect(mnistFlag.stderr).toMatch(/option '--train-size <n>' cannot be used with option '--data <folder>'/);
  });
});
