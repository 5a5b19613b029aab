/**
 * fit(): training and validation numbers, the callbacks (order of hooks, TensorBoard, checkpoints
 * on the best score, early stopping, progress bar), resuming bit for bit, an event loop left free,
 * and bad arguments.
 */
import * as fs from 'node:fs';
import Module from 'node:module';
import * as os from 'node:os';
import * as path from 'node:path';
import { Writable } from 'node:stream';

import { afterEach, beforeEach, describe, expect, it } from 'vitest';

import {
  AdamW, cosineWithWarmup, crossEntropy, earlyStopping, fit, Linear, loadCheckpoint, modelCheckpoint, mseOps, progressBar, saveCheckpoint,
  SGD, SummaryWriter, Tensor, tensorBoard, ViTClassifier, type Batch, type BatchSource, type Callback, type EpochLogs,
} from '../lib';
import { countHits } from '../lib/training/fit_accuracy';
import { randn, rng } from './helpers';
import { readEvents } from './support/tfrecord_reader';

const CONFIG = { imgSize: 8, patchSize: 4, inChannels: 1, numClasses: 3, dModel: 16, numHeads: 2, dFF: 24, depth: 1, dropout: 0.1 };

/** Batches of 8×8 images whose class (0..2) is the brighter third of the rows; awkward last batch. */
function dataset(seed: number, count: number, batchSize: number): Batch[] {
  const rand = rng(seed), out: Batch[] = [];
  for (let start = 0; start < count; start += batchSize) {
    const n = Math.min(batchSize, count - start);
    const x = Float32Array.from(randn(n * 64, rand, 0.5)), y = new Int32Array(n);
    for (let i = 0; i < n; i++) {
      y[i] = Math.floor(rand() * 3);
      for (let p = 0; p < 64; p++) if (Math.floor(Math.floor(p / 8) / 3) === y[i]) x[i * 64 + p] += 1.5;
    }
    out.push({ input: Tensor.from(x, [n, 1, 8, 8]), target: Tensor.from(y, [n]) });
  }
  return out;
}

const model = (seed = 0, dropout = CONFIG.dropout) => new ViTClassifier({ ...CONFIG, seed, dropout });
const numbers = (h: readonly EpochLogs[]) => h.map(({ epoch, step, loss, accuracy, valLoss, valAccuracy, lr, samples }) =>
  ({ epoch, step, loss, accuracy, valLoss, valAccuracy, lr, samples }));

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nf-fit-'));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('fit', () => {
  it('trains, validates in eval mode, follows the schedule and calls the hooks in order', async () => {
    const m = model(), opt = new AdamW(m.parameters(), { lr: 1e-2 });
    const train = dataset(1, 75, 16), val = dataset(2, 37, 10);
    const schedule = cosineWithWarmup({ lr: 1e-2, warmupSteps: 3, totalSteps: 25 });
    const calls: string[] = [], lrs: number[] = [];
    const recorder: Callback = {
      onTrainBegin: (ctx) => void calls.push(`begin ${ctx.epochs} ${ctx.batchesPerEpoch} ${ctx.hasValidation}`),
      onEpochBegin: (e) => void calls.push(`epoch ${e}`),
      onBatchEnd: async (b, ctx) => {
        await new Promise((r) => setTimeout(r, 1)); // hooks are awaited
        calls.push(`batch ${b.batch} step ${b.step} n ${b.samples} ${ctx.model.training}`);
        lrs.push(b.lr);
        expect(b.accuracy).toBeGreaterThanOrEqual(0);
      },
      onEpochEnd: (logs, ctx) => void calls.push(`end ${logs.epoch} ${ctx.history.length}`),
      onTrainEnd: (h) => void calls.push(`done ${h.length}`),
    };
    const history = await fit(m, opt, train, { epochs: 5, validation: val, schedule, callbacks: [recorder] });
    expect(history).toHaveLength(5);
    expect(calls[0]).toBe('begin 5 5 true');
    expect(calls.filter((c) => c.startsWith('batch'))).toHaveLength(25);
    expect(calls.slice(1, 8)).toEqual(['epoch 1', 'batch 0 step 1 n 16 true', 'batch 1 step 2 n 16 true', 'batch 2 step 3 n 16 true',
      'batch 3 step 4 n 16 true', 'batch 4 step 5 n 11 true', 'end 1 1']);
    expect(calls.at(-1)).toBe('done 5');
    expect(lrs).toEqual(Array.from({ length: 25 }, (_, s) => schedule(s + 1)));
    expect(history.map((h) => [h.epoch, h.step, h.samples, h.lr])).toEqual([1, 2, 3, 4, 5].map((e) => [e, 5 * e, 75, schedule(5 * e)]));
    expect(history[4].loss).toBeLessThan(history[0].loss * 0.7);
    expect(history[4].valAccuracy).toBeGreaterThan(0.6);
    for (const h of history) expect(h.samplesPerSecond).toBeCloseTo(h.samples / h.seconds, 6);
    // Validation is a forward in eval mode: the same numbers by hand, with the final weights.
    expect(m.training).toBe(true);
    m.eval();
    let lossSum = 0, correct = 0;
    for (const b of val) {
      const logits = m.forward(b.input as Tensor);
      lossSum += crossEntropy(logits, b.target).loss * b.target.shape[0];
      correct += countHits(logits, b.target)!.correct;
    }
    expect(history[4].valLoss).toBeCloseTo(lossSum / 37, 6);
    expect(history[4].valAccuracy).toBe(correct / 37);
    m.dispose();
  });

  it('takes async iterables with setEpoch, forward argument lists and any loss; accuracy only for classification', async () => {
    const lin = new Linear({ inFeatures: 5, outFeatures: 2, seed: 3 }), opt = new SGD(lin.parameters(), { lr: 0.1 });
    const rand = rng(4), w = [0.5, -1, 2, 0, 1];
    const batches = Array.from({ length: 3 }, () => {
      const x = Float32Array.from(randn(7 * 5, rand));
      const y = Float32Array.from({ length: 14 }, (_, i) => w.reduce((s, wk, k) => s + wk * x[Math.floor(i / 2) * 5 + k], 0));
      return { input: [Tensor.from(x, [7, 5])] as [Tensor], target: Tensor.from(y, [7, 2]) };
    });
    const epochs: number[] = [];
    const source: BatchSource<Batch<Linear>> = {
      setEpoch: (e) => void epochs.push(e),
      async *[Symbol.asyncIterator]() {
        for (const b of batches) yield b;
      },
    };
    const history = await fit(lin, opt, source, { epochs: 4, loss: mseOps, validation: source, maxGradNorm: 10 });
    expect(epochs).toEqual([1, 1, 2, 2, 3, 3, 4, 4]);
    expect(history[3].loss).toBeLessThan(history[0].loss);
    for (const h of history) expect(h.accuracy === undefined && h.valAccuracy === undefined).toBe(true);
    lin.dispose();
  });

  it('leaves the event loop free', async () => {
    const m = model(), opt = new AdamW(m.parameters());
    let ticks = 0;
    const timer = setInterval(() => ticks++, 1);
    const t0 = performance.now();
    await fit(m, opt, dataset(5, 256, 32), { epochs: 2 });
    clearInterval(timer);
    const ms = performance.now() - t0;
    expect(ticks).toBeGreaterThan(Math.min(20, ms / 10));
    m.dispose();
  });
});

describe('callbacks', () => {
  it('tensorBoard logs every epoch number, and histograms on request', async () => {
    const m = model(), opt = new AdamW(m.parameters(), { lr: 5e-3 });
    const logdir = path.join(dir, 'tb');
    const history = await fit(m, opt, dataset(1, 40, 16), { epochs: 3, validation: dataset(2, 20, 20), callbacks: [tensorBoard(logdir, { histograms: true })] });
    const file = fs.readdirSync(logdir).find((f) => f.startsWith('events.out.tfevents.'))!;
    const events = readEvents(fs.readFileSync(path.join(logdir, file)));
    const series = (tag: string) => events.filter((e) => e.values[0]?.tag === tag).map((e) => [e.step, e.values[0].simpleValue]);
    const want = (k: keyof EpochLogs) => history.map((h) => [h.epoch, Math.fround(h[k] as number)]);
    expect(series('loss/train')).toEqual(want('loss'));
    expect(series('loss/validation')).toEqual(want('valLoss'));
    expect(series('accuracy/train')).toEqual(want('accuracy'));
    expect(series('accuracy/validation')).toEqual(want('valAccuracy'));
    expect(series('learning_rate')).toEqual(want('lr'));
    expect(series('throughput/samples_per_second')).toEqual(want('samplesPerSecond'));
    const names = m.namedParameters().map(([n]) => n);
    const histos = events.filter((e) => e.values[0]?.histo && e.step === 3).map((e) => e.values[0].tag);
    expect(histos.sort()).toEqual([...names.map((n) => `weights/${n}`), ...names.map((n) => `gradients/${n}`)].sort());
    m.dispose();
  });

  it('tensorBoard with a writer flushes it each epoch and leaves it open', async () => {
    const m = model(), opt = new AdamW(m.parameters());
    const w = new SummaryWriter(dir);
    const sizes: number[] = [];
    const after: Callback = { onEpochEnd: () => void sizes.push(fs.statSync(w.file).size) };
    await fit(m, opt, dataset(1, 16, 16), { epochs: 2, callbacks: [tensorBoard(w), after] });
    expect(sizes[1]).toBeGreaterThan(sizes[0]);
    expect(w.closed).toBe(false);
    w.addText('after', 'still open', 3);
    await w.close();
    m.dispose();
  });

  it('modelCheckpoint saves on the best validation score; earlyStopping stops after `patience` epochs without one', async () => {
    const m = model(), opt = new AdamW(m.parameters());
    const file = path.join(dir, 'best.safetensors');
    const saves: number[] = [];
    const spy: Callback = { onEpochEnd: () => void (fs.existsSync(file) && saves.push(loadCheckpoint(file).step)) };
    // lr 0 after epoch 2: the validation loss stops moving, so epochs 3 and 4 do not improve it.
    const schedule = (step: number) => (step <= 6 ? 3e-3 : 0);
    const history = await fit(m, opt, dataset(1, 48, 16), {
      epochs: 20, validation: dataset(2, 30, 30), schedule,
      callbacks: [modelCheckpoint(file, { monitor: 'valLoss' }), earlyStopping({ monitor: 'valLoss', patience: 2 }), spy],
    });
    expect(history.map((h) => h.epoch)).toEqual([1, 2, 3, 4]);
    expect(history[1].valLoss).toBeLessThan(history[0].valLoss!);
    expect(saves).toEqual([3, 6, 6, 6]);
    const ck = loadCheckpoint(file);
    expect((ck.meta!.fit as { epoch: number }).epoch).toBe(2);
    for (const t of Object.values(ck.model)) t.dispose();
    m.dispose();
  });

  it('earlyStopping on accuracy (mode auto: larger is better) and with minDelta', async () => {
    const m = model(0, 0), opt = new AdamW(m.parameters(), { lr: 0 }); // no dropout, no updates: the same accuracy every epoch
    const history = await fit(m, opt, dataset(1, 16, 16), { epochs: 9, callbacks: [earlyStopping({ monitor: 'accuracy', patience: 0 })] });
    expect(history).toHaveLength(2);
    const m2 = model(), opt2 = new AdamW(m2.parameters(), { lr: 1e-3 });
    const h2 = await fit(m2, opt2, dataset(1, 16, 16), { epochs: 9, callbacks: [earlyStopping({ monitor: 'loss', patience: 1, minDelta: 10 })] });
    expect(h2).toHaveLength(2);
    m.dispose();
    m2.dispose();
  });

  it('progressBar draws on a TTY only', async () => {
    expect(progressBar({ stream: Object.assign(new Writable(), { isTTY: false }) as never })).toEqual({});
    let out = '';
    const tty = Object.assign(new Writable({ write: (c, _e, cb) => ((out += String(c)), cb()) }), { isTTY: true, columns: 120 });
    const m = model(), opt = new AdamW(m.parameters());
    await fit(m, opt, dataset(1, 40, 16), { epochs: 2, callbacks: [progressBar({ stream: tty as never })] });
    expect(out).toMatch(/epoch 1\/2 \[.*\] 100% \| loss \d\.\d{4} \| acc \d+\.\d\d% \| \d+ samples\/s/);
    expect(out).toMatch(/epoch 2\/2/);
    m.dispose();
  });

  it('progressBar on a TTY without cli-progress prints a line per epoch after a note naming the npm install; training goes on', async () => {
    const resolver = Module as unknown as { _resolveFilename: (request: string, ...rest: unknown[]) => string };
    const resolve = resolver._resolveFilename;
    resolver._resolveFilename = function (request, ...rest) { // as in an install that left the optional peer out
      if (request === 'cli-progress') throw Object.assign(new Error(`Cannot find module '${request}'`), { code: 'MODULE_NOT_FOUND' });
      return resolve.call(this, request, ...rest);
    };
    let text = '';
    const stream = Object.assign(new Writable({ write: (c, _e, cb) => ((text += String(c)), cb()) }), { isTTY: true });
    try {
      const m = model();
      const history = await fit(m, new AdamW(m.parameters()), dataset(1, 20, 8), {
        epochs: 2, validation: dataset(2, 8, 8), callbacks: [progressBar({ stream: stream as never })] });
      expect(history).toHaveLength(2);
    } finally {
      resolver._resolveFilename = resolve;
    }
    const lines = text.trimEnd().split('\n');
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatch(/^progressBar\(\): cli-progress is not installed, so progress is one line per epoch; for a bar per epoch: npm install 'cli-progress@\^[\d.]+'$/);
    expect(lines[1]).toMatch(/^epoch 1\/2 \| loss \d\.\d{4} \| acc [\d.]+% \| val loss \d\.\d{4} \| val acc [\d.]+% \| [\d,]+ samples\/s \| [\d.]+ s$/);
    expect(lines[2]).toMatch(/^epoch 2\/2 \| /);
  });
});

describe('resuming', () => {
  it('continues at the next epoch with the numbers of an uninterrupted run, bit for bit', async () => {
    const schedule = cosineWithWarmup({ lr: 5e-3, warmupSteps: 2, totalSteps: 16 });
    const run = async (epochs: number, seed: number, extra: { resumeFrom?: string; callbacks?: Callback[] } = {}) => {
      const m = model(seed), opt = new AdamW(m.parameters(), { lr: 1 });
      const h = await fit(m, opt, dataset(1, 50, 16), { epochs, validation: dataset(2, 20, 20), schedule, ...extra });
      m.dispose();
      return h;
    };
    const whole = await run(4, 0);
    const file = path.join(dir, 'last.safetensors');
    await run(2, 0, { callbacks: [modelCheckpoint(file, { saveBestOnly: false })] });
    const resumed = await run(4, 99, { resumeFrom: file }); // other initial weights: the checkpoint replaces them
    expect(numbers(resumed)).toEqual(numbers(whole));
    // The checkpoint of a resumed run's best keeps its earlier history, so early stopping and best scores carry on.
    const best = path.join(dir, 'best.safetensors');
    await run(2, 0, { callbacks: [modelCheckpoint(best)] });
    const h = await run(3, 0, { resumeFrom: best, callbacks: [modelCheckpoint(best)] });
    expect(h.map((e) => e.epoch)).toEqual([1, 2, 3]);
  });

  it('rejects a checkpoint without fit state', async () => {
    const m = model(), opt = new AdamW(m.parameters());
    const file = path.join(dir, 'plain.safetensors');
    saveCheckpoint(file, { model: m, optimizer: opt, step: 3 });
    await expect(fit(m, opt, dataset(1, 16, 16), { epochs: 2, resumeFrom: file })).rejects.toMatchObject({ code: 'ERR_NF_FORMAT' });
    m.dispose();
  });
});

describe('fit arguments', () => {
  const m = model(), opt = new AdamW(m.parameters()), data = dataset(1, 16, 16);
  const bad = async (p: Promise<unknown>, re: RegExp) => {
    await expect(p).rejects.toMatchObject({ code: 'ERR_NF_INVALID_ARG' });
    await expect(p).rejects.toThrow(re);
  };

  it('rejects bad models, optimizers, loaders, options and callbacks', async () => {
    await bad(fit({} as never, opt, data, { epochs: 1 }), /model/);
    await bad(fit(m, {} as never, data, { epochs: 1 }), /optimizer/);
    await bad(fit(m, opt, 5 as never, { epochs: 1 }), /trainLoader/);
    await bad(fit(m, opt, { [Symbol.iterator]: () => data.values(), length: -1 }, { epochs: 1 }), /trainLoader\.length/);
    await bad(fit(m, opt, data, undefined as never), /options/);
    await bad(fit(m, opt, data, { epochs: 0 }), /options\.epochs/);
    await bad(fit(m, opt, data, { epoch: 1 } as never), /Unknown key 'epoch' \(did you mean 'epochs'\?\)/);
    await bad(fit(m, opt, data, { epochs: 1, maxGradNorm: -1 }), /maxGradNorm/);
    await bad(fit(m, opt, data, { epochs: 1, callbacks: {} as never }), /options\.callbacks/);
    await bad(fit(m, opt, data, { epochs: 1, callbacks: [{ onEpochEnd: 1 } as never] }), /callbacks\[0\]\.onEpochEnd/);
    await bad(fit(m, opt, [{ input: 1, target: 2 }] as never, { epochs: 1 }), /trainLoader batch 0/);
    await bad(fit(m, opt, data, { epochs: 1, callbacks: [modelCheckpoint(path.join(dir, 'x'))] }), /no validation loader\) for modelCheckpoint options\.monitor/);
    const lin = new Linear({ inFeatures: 2, outFeatures: 1 }), regression = [{ input: Tensor.zeros([4, 2]), target: Tensor.zeros([4, 1]) }];
    await bad(fit(lin, new SGD(lin.parameters()), regression, { epochs: 1, loss: mseOps, callbacks: [earlyStopping({ monitor: 'accuracy' })] }),
      /epoch logs hold \(loss; accuracies need classification outputs\) for earlyStopping options\.monitor/);
  });

  it('rejects a generator that runs once', async () => {
    const once = (function* () {
      yield* data;
    })();
    await bad(fit(m, opt, once, { epochs: 2 }), /yielded none in epoch 2|batches in epoch 2/);
  });

  it('rejects bad callback options', () => {
    const code = (f: () => unknown, re: RegExp) => {
      expect(f).toThrow(expect.objectContaining({ code: 'ERR_NF_INVALID_ARG' }));
      expect(f).toThrow(re);
    };
    code(() => modelCheckpoint(''), /path/);
    code(() => modelCheckpoint('x', { mode: 'up' as never }), /mode/);
    code(() => modelCheckpoint('x', { monitor: 'val_loss' as never }), /monitor/);
    code(() => modelCheckpoint('x', { saveBestOnyl: true } as never), /did you mean 'saveBestOnly'/);
    code(() => earlyStopping({ patience: -1 }), /patience/);
    code(() => earlyStopping({ minDelta: -1 }), /minDelta/);
    code(() => tensorBoard(''), /writerOrLogdir/);
    code(() => tensorBoard('x', { histogram: true } as never), /did you mean 'histograms'/);
    code(() => progressBar({ steam: 1 } as never), /did you mean 'stream'/);
  });
});

describe('accuracy', () => {
  it('counts argmax hits over the last axis and skips negative labels', () => {
    const logits = Tensor.from(Float32Array.of(1, 2, 0, 5, 1, 1, 0, 0, 3, 2, 9, 1), [2, 2, 3]);
    expect(countHits(logits, Tensor.from(Int32Array.of(1, 0, -100, 2), [2, 2]))).toEqual({ correct: 2, total: 3 });
    expect(countHits(logits, Tensor.from(Float32Array.of(1, 0, 0, 2), [2, 2]))).toBeNull();
    expect(countHits(logits, Tensor.from(Int32Array.of(1, 0, 0), [3]))).toBeNull();
  });
});
