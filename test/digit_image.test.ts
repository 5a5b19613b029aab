/**
 * One preprocessing for `nodeformer predict` and the example server (lib/cli/images.ts): the same
 * picture — here a dark-on-light 7 at 70×56 — gives the same input tensor through both
 * entry points and the same prediction from both programs; a file that is no PNG, or a truncated
 * one, gets a clear message instead of the PNG decoder's.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { PNG } from 'pngjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startServer, type RunningServer } from '../examples/server/app';
import { pngToDigit } from '../examples/server/image';
import { postPng } from '../examples/server/measure';
import { digitBatch, readDigitPng } from '../lib/cli/images';
import { DIGIT_PIXELS, DIGIT_SIZE, loadMnist } from '../lib/cli/mnist';
import { saveModel, ViTClassifier } from '../lib/index';
import { runCli } from './support/run_cli';

/** A digit drawn dark on light paper at twice its size, with 7 px margins left and right (70×56, RGBA). */
function paperDigit(digit: Float32Array): Buffer {
  const png = new PNG({ width: 70, height: 56 });
  for (let y = 0; y < 56; y++)
    for (let x = 0; x < 70; x++) {
      const sx = Math.floor((x - 7) / 2), ink = sx >= 0 && sx < 28 ? digit[Math.floor(y / 2) * 28 + sx] : 0;
      const v = Math.round(255 * (1 - ink));
      png.data.set([v, v, v, 255], 4 * (y * 70 + x));
    }
  return PNG.sync.write(png);
}

const cliPredict = (...args: string[]) => runCli('predict', ...args);

describe('digit preprocessing shared by the CLI and the server', () => {
  let dir: string, model: string, picture: string, server: RunningServer;
  const seven = (() => {
    const { test } = loadMnist({ trainSize: 1, testSize: 200 });
    const i = Array.from(test.labels).indexOf(7);
    return test.pixels.slice(i * DIGIT_PIXELS, (i + 1) * DIGIT_PIXELS);
  })();

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nf-digit-'));
    model = path.join(dir, 'model.safetensors');
    const m = new ViTClassifier({ imgSize: 28, patchSize: 7, inChannels: 1, numClasses: 10, dModel: 32, numHeads: 2, dFF: 64, depth: 1, seed: 9 });
    saveModel(model, m);
    m.dispose();
    picture = path.join(dir, 'seven.png');
    fs.writeFileSync(picture, paperDigit(seven));
    server = await startServer({ checkpoint: model, host: '127.0.0.1', port: 0 });
  });

  afterAll(async () => {
    await server?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('gives the same tensor through the CLI and the server entry points, inverted to light on dark', () => {
    const viaCli = digitBatch([readDigitPng(picture)], DIGIT_SIZE);
    const viaServer = digitBatch([pngToDigit(fs.readFileSync(picture), DIGIT_SIZE)], DIGIT_SIZE);
    expect(viaCli.shape).toEqual([1, 1, 28, 28]);
    expect(Array.from(viaServer.data)).toEqual(Array.from(viaCli.data));
    // Dark on light became light on dark: the border is background, the digit's pixels are bright.
    const pixels = readDigitPng(picture);
    expect(pixels[0]).toBeLessThan(0.05);
    expect(Math.max(...pixels)).toBeGreaterThan(0.9);
  });

  it('predicts the same digit with the same probability from `nodeformer predict` and POST /predict', async () => {
    const cli = await cliPredict(picture, '--model', model);
    expect(cli.status, cli.stderr).toBe(0);
    const [, label, percent] = /: (\d) \((\d+\.\d)%\)$/.exec(cli.out)!;
    const { status, body } = await postPng(server.url, fs.readFileSync(picture));
    expect(status).toBe(200);
    expect(body.label).toBe(Number(label));
    expect((100 * body.probabilities![body.label!]).toFixed(1)).toBe(percent);
  });

  it('names a file that is not a PNG, and a truncated PNG, in words (CLI exit 2, server 415/400)', async () => {
    const notPng = path.join(dir, 'weights.png');
    fs.writeFileSync(notPng, fs.readFileSync(model));
    const r = await cliPredict(notPng, '--model', model);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/Expected an image \(PNG, JPEG, .*\) for .*weights\.png but received \d+ bytes that do not decode/);
    const cut = path.join(dir, 'cut.png');
    fs.writeFileSync(cut, fs.readFileSync(picture).subarray(0, 60));
    const t = await cliPredict(cut, '--model', model);
    expect(t.status).toBe(2);
    expect(t.stderr).toMatch(/cut\.png but it cannot be decoded: the file is truncated/);
    expect(t.stderr).not.toMatch(/waitng/);
    expect((await postPng(server.url, fs.readFileSync(notPng))).status).toBe(415);
    expect((await postPng(server.url, fs.readFileSync(cut))).status).toBe(400);
  });
});
