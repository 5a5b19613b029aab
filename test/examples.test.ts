/**
 * Smoke tests of the examples: the seq2seq pipeline end to end on a tiny configuration, and the
 * HTTP service on 127.0.0.1 (ephemeral port, a small random-weight checkpoint made here).
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { PNG } from 'pngjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startServer, type RunningServer } from '../examples/server/app';
import { saveClassifier } from '../examples/server/checkpoint';
import { measureService, postPng, ringPng } from '../examples/server/measure';
import { batchTensors, BOS, DateTask, decode, encode, EOS, PAD, TGT_LEN } from '../examples/seq2seq/dates';
import { trainSeq2seq, type Progress } from '../examples/seq2seq/train';
import { saveSafetensors, Tensor, ViTClassifier } from '../lib/index';

describe('seq2seq example', () => {
  it('builds a deterministic date task whose test dates never appear in training', () => {
    const a = new DateTask({ seed: 3, testDates: 50, validDates: 20 }), b = new DateTask({ seed: 3, testDates: 50, validDates: 20 });
    expect(a.test).toEqual(b.test);
    expect(a.trainBatch(30)).toEqual(b.trainBatch(30));
    const trainIso = new Set(a.train.map(([y, m, d]) => `${y}-${String(m).padStart(2, '0')}-${String(d).padStart(2, '0')}`));
    for (const p of [...a.test, ...a.valid]) {
      expect(p.tgt).toMatch(/^\d{4}-\d{2}-\d{2}$/);
      expect(trainIso.has(p.tgt)).toBe(false);
    }
    expect(decode([BOS, ...encode('may 5, 2023'), EOS, PAD])).toBe('may 5, 2023');
    const { src, S, tgtIn, tgtOut, T } = batchTensors([{ src: '05.04.2023', tgt: '2023-04-05' }, { src: 'september 30, 2049', tgt: '2049-09-30' }]);
    expect([S, T]).toEqual([18, TGT_LEN - 1]);
    expect(Array.from(src.subarray(10, 18))).toEqual(new Array(8).fill(PAD)); // the shorter source is padded
    expect(tgtIn[0]).toBe(BOS);
    expect(tgtOut[T - 1]).toBe(EOS);
    expect(decode(tgtOut.subarray(0, T))).toBe('2023-04-05');
  });

  it('trains a tiny Transformer and scores greedy generate on held-out dates', async () => {
    const progress: Progress[] = [];
    const r = await trainSeq2seq({ steps: 20, batchSize: 16, dModel: 16, numHeads: 2, dFF: 32, depth: 1, warmupSteps: 10,
      testDates: 40, validDates: 10 }, (p) => progress.push(p), 10);
    expect(progress.map((p) => p.step)).toEqual([10, 20]);
    for (const p of progress) {
      expect(Number.isFinite(p.loss) && p.loss > 0).toBe(true);
      expect(p.validAccuracy).toBeGreaterThanOrEqual(0);
      expect(p.validAccuracy).toBeLessThanOrEqual(1);
    }
    expect(progress[1].loss).toBeLessThan(progress[0].loss);
    expect(r.predictions).toHaveLength(40);
    for (const p of r.predictions) expect(typeof p.got).toBe('string');
    expect(r.accuracy).toBe(r.predictions.filter((p) => p.got === p.want).length / 40);
    expect(r.trainSeconds).toBeGreaterThan(0);
    const bestValid = Math.max(...progress.map((p) => p.validAccuracy)); // the model keeps the last best-scoring weights
    expect(r.bestStep).toBe(progress.filter((p) => p.validAccuracy === bestValid).at(-1)!.step);
    r.model.dispose();
  });
});

describe('server example', () => {
  let dir: string;
  let server: RunningServer;
  const MAX_BODY = 64 * 1024;

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nf-server-test-'));
    const model = new ViTClassifier({ imgSize: 28, patchSize: 4, inChannels: 1, numClasses: 10, dModel: 64, numHeads: 4, dFF: 128, depth: 3, seed: 5 });
    saveClassifier(path.join(dir, 'model.safetensors'), model);
    model.dispose();
    server = await startServer({ checkpoint: path.join(dir, 'model.safetensors'), host: '127.0.0.1', port: 0, maxBodyBytes: MAX_BODY });
  });

  afterAll(async () => {
    await server?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('classifies a posted 28×28 PNG', async () => {
    expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const { status, body } = await postPng(server.url, ringPng());
    expect(status).toBe(200);
    const probs = body.probabilities!;
    expect(probs).toHaveLength(10);
    expect(probs.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 5);
    expect(body.label).toBe(probs.indexOf(Math.max(...probs)));
  });

  it('resamples other sizes and colour types', async () => {
    const png = new PNG({ width: 50, height: 36 });
    for (let i = 0; i < 50 * 36; i++) png.data.set([200, 30, 90, i % 7 ? 255 : 0], 4 * i);
    const { status, body } = await postPng(server.url, PNG.sync.write(png));
    expect(status).toBe(200);
    expect(body.probabilities).toHaveLength(10);
  });

  it('keeps /health answering quickly while predictions run', async () => {
    const m = await measureService(server.url, { requests: 48, concurrency: 12, png: ringPng() });
    expect(m.predict.statuses).toEqual({ 200: 48 });
    expect(m.health.count).toBeGreaterThanOrEqual(3);
    // /health never waits for a forward: it answers in a fraction of a prediction's time, and the
    // HTTP thread's event loop is free most of the time (were the forwards run on it, it would be
    // blocked for most of the load). Medians, so that a busy shared machine cannot fail them.
    expect(m.health.p50).toBeLessThan(m.predict.p50 / 4);
    expect(m.eventLoopDelay.p50).toBeLessThan(50);
    const res = await fetch(`${server.url}/health`);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ status: 'ok', model: { imgSize: 28, inChannels: 1, numClasses: 10 }, queued: 0, inFlight: 0 });
  });

  it('answers bad requests with JSON 4xx errors and stays up', async () => {
    const png = ringPng();
    const huge = Buffer.from(png);
    huge.writeUInt32BE(100_000, 16); // IHDR width
    const cases: [string, RequestInit, string, number, string][] = [
      ['POST', { body: 'hello, not a png' }, '/predict', 415, 'not_png'],
      ['POST', {}, '/predict', 400, 'empty_body'],
      ['POST', { body: png.subarray(0, 40) }, '/predict', 400, 'invalid_png'],
      ['POST', { body: huge }, '/predict', 400, 'bad_dimensions'],
      ['POST', { body: Buffer.alloc(MAX_BODY + 1) }, '/predict', 413, 'payload_too_large'],
      ['GET', {}, '/predict', 405, 'method_not_allowed'],
      ['DELETE', {}, '/health', 405, 'method_not_allowed'],
      ['GET', {}, '/nope', 404, 'not_found'],
    ];
    for (const [method, init, route, status, code] of cases) {
      const res = await fetch(`${server.url}${route}`, { method, ...init });
      expect([method, route, res.status]).toEqual([method, route, status]);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      const body = (await res.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe(code);
      expect(body.error.message.length).toBeGreaterThan(10);
    }
    expect((await fetch(`${server.url}/predict`)).headers.get('allow')).toBe('POST');
    expect((await postPng(server.url, png)).status).toBe(200);
  });

  it('refuses to start on a checkpoint that is not a ViTClassifier', async () => {
    const file = path.join(dir, 'other.safetensors');
    saveSafetensors(file, { w: Tensor.from(new Float32Array(4), [4]) }, { module: 'Transformer', config: '{}' });
    await expect(startServer({ checkpoint: file })).rejects.toThrow(/Cannot load the checkpoint .*ViTClassifier/);
  });
});
