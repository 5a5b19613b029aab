/**
 * Checkpoints: resuming gives the losses of an uninterrupted run bit for bit (dropout, AdamW/SGD
 * state, schedule and clipping included), a write that is killed or fails leaves the previous
 * checkpoint intact, and a mismatched checkpoint changes nothing.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { describe, expect, it, vi } from 'vitest';

import {
  AdamW, cosineWithWarmup, inverseSqrtWarmup, loadCheckpoint, resume, resumeAsync, saveCheckpoint, saveCheckpointAsync, SGD,
  Tensor, trainStep, trainStepAsync, Transformer, ViTClassifier, type Optimizer, type Schedule,
} from '../lib';
import { Random } from '../lib/core/random';
import { bundle, bundleEnv } from './support/bundle';

vi.mock('node:fs', async (importOriginal) => {
  const real = await importOriginal<typeof import('node:fs')>();
  return { ...real, renameSync: vi.fn(real.renameSync) };
});

const tmpDir = () => fs.mkdtempSync(path.join(os.tmpdir(), 'nf-ckpt-'));
const vitConfig = { imgSize: 8, patchSize: 4, inChannels: 1, numClasses: 4, dModel: 16, numHeads: 2, dFF: 32, depth: 2, dropout: 0.1 };

/** The batch of step s: the same data whichever run asks for it. */
function vitBatch(s: number) {
  const r = new Random(1000 + s);
  return { images: Tensor.from(r.normalArray(4 * 64, 1), [4, 1, 8, 8]), labels: Tensor.from(Int32Array.from({ length: 4 }, () => r.u32() % 4), [4]) };
}

function vitStep(m: ViTClassifier, opt: Optimizer<{ lr: number }>, schedule: Schedule, s: number): number {
  const { images, labels } = vitBatch(s);
  opt.options.lr = schedule(s);
  return trainStep(m, opt, images, labels, { maxGradNorm: 1 });
}

const params = (m: { parameters(): { toArray(): Float32Array }[] }) => m.parameters().map((p) => Array.from(p.toArray()));

describe('checkpoints', () => {
  it('ViTClassifier + AdamW + cosine schedule: resuming a fresh instance continues with bit-identical losses', () => {
    const file = path.join(tmpDir(), 'run.ckpt');
    const N = 5, M = 6;
    const schedule = cosineWithWarmup({ lr: 3e-3, warmupSteps: 3, totalSteps: N + M });
    const a = new ViTClassifier({ ...vitConfig, seed: 1 });
    const oa = new AdamW(a.parameters(), { weightDecay: 0.05 });
    const uninterrupted: number[] = [];
    for (let s = 1; s <= N + M; s++) {
      uninterrupted.push(vitStep(a, oa, schedule, s));
      if (s === N) saveCheckpoint(file, { model: a, optimizer: oa, schedule, step: s });
    }
    const b = new ViTClassifier({ ...vitConfig, seed: 99 });
    const ob = new AdamW(b.parameters());
    const r = resume(file, { model: b, optimizer: ob });
    expect(r.step).toBe(N);
    expect(r.schedule!.config).toEqual(schedule.config);
    const resumed: number[] = [];
    for (let s = r.step + 1; s <= N + M; s++) resumed.push(vitStep(b, ob, r.schedule!, s));
    console.log(`losses after step ${N}: uninterrupted ${uninterrupted.slice(N).join(', ')}\n                     resumed       ${resumed.join(', ')}`);
    expect(resumed).toEqual(uninterrupted.slice(N));
    expect(params(b)).toEqual(params(a));
  });

  it('Transformer + SGD with momentum through the async API (saveCheckpointAsync, resumeAsync, trainStepAsync)', async () => {
    const file = path.join(tmpDir(), 'seq.ckpt');
    const config = { srcVocab: 11, tgtVocab: 13, maxLen: 8, dModel: 16, numHeads: 2, dFF: 32, depth: 2, dropout: 0.1 };
    const schedule = inverseSqrtWarmup({ dModel: 16, warmupSteps: 4 });
    const batch = (s: number) => {
      const r = new Random(2000 + s), tok = (v: number) => Tensor.from(Int32Array.from({ length: 2 * 6 }, () => 1 + (r.u32() % (v - 1))), [2, 6]);
      return { src: tok(11), tgt: tok(13), out: tok(13) };
    };
    const step = (m: Transformer, o: SGD, sched: Schedule, s: number) => {
      const { src, tgt, out } = batch(s);
      o.options.lr = sched(s);
      return trainStepAsync(m, o, [src, tgt], out);
    };
    const a = new Transformer({ ...config, seed: 3 });
    const oa = new SGD(a.parameters(), { momentum: 0.9 });
    const uninterrupted: number[] = [];
    for (let s = 1; s <= 7; s++) {
      uninterrupted.push(await step(a, oa, schedule, s));
      if (s === 3) await saveCheckpointAsync(file, { model: a, optimizer: oa, schedule, step: s });
    }
    const b = new Transformer({ ...config, seed: 4 });
    const ob = new SGD(b.parameters(), { momentum: 0.9 });
    const r = await resumeAsync(file, { model: b, optimizer: ob });
    const resumed: number[] = [];
    for (let s = r.step + 1; s <= 7; s++) resumed.push(await step(b, ob, r.schedule!, s));
    expect(resumed).toEqual(uninterrupted.slice(3));
    expect(params(b)).toEqual(params(a));
  });

  it('a writer killed mid-write leaves the previous checkpoint intact', async () => {
    const dir = tmpDir(), file = path.join(dir, 'model.ckpt');
    const m = new ViTClassifier({ ...vitConfig, seed: 5 });
    saveCheckpoint(file, { model: m, optimizer: new AdamW(m.parameters()), step: 42 });
    const before = fs.readFileSync(file);
    const writer = bundle('test/support/checkpoint_writer.ts');
    let killedMidWrite = false;
    for (let attempt = 0; attempt < 3 && !killedMidWrite; attempt++) {
      const child = spawn(process.execPath, [writer, file], { env: bundleEnv(), stdio: 'ignore' });
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      const deadline = Date.now() + 60_000;
      // Poll (blocking this thread, not the child) until the temporary file has bytes, then kill.
      while (Date.now() < deadline && child.exitCode === null) {
        const tmp = fs.readdirSync(dir).find((f) => f.includes('.tmp-'));
        if (tmp && fs.statSync(path.join(dir, tmp), { throwIfNoEntry: false })?.size) {
          killedMidWrite = child.kill('SIGKILL');
          break;
        }
      }
      await exited;
      if (!killedMidWrite) fs.writeFileSync(file, before); // the child won the race: restore and retry
    }
    expect(killedMidWrite).toBe(true);
    expect(fs.readFileSync(file).equals(before)).toBe(true);
    const ck = loadCheckpoint(file);
    expect(ck.step).toBe(42);
    expect(Object.keys(ck.model).length).toBe(m.parameters().length);
  });

  it('a failed rename leaves the previous checkpoint intact and removes the temporary file', () => {
    const dir = tmpDir(), file = path.join(dir, 'model.ckpt');
    const m = new ViTClassifier({ ...vitConfig, seed: 6 });
    saveCheckpoint(file, { model: m, step: 1 });
    const before = fs.readFileSync(file);
    vi.mocked(fs.renameSync).mockImplementationOnce(() => {
      throw Object.assign(new Error('EIO: i/o error, rename'), { code: 'EIO' });
    });
    m.head.bias!.data.fill(3);
    expect(() => saveCheckpoint(file, { model: m, step: 2 })).toThrow(/Cannot write .*EIO/);
    expect(fs.readdirSync(dir)).toEqual(['model.ckpt']);
    expect(fs.readFileSync(file).equals(before)).toBe(true);
    expect(loadCheckpoint(file).step).toBe(1);
  });

  it('a mismatched checkpoint is refused and leaves model, optimizer and random streams unchanged', () => {
    const file = path.join(tmpDir(), 'small.ckpt');
    const small = new ViTClassifier({ ...vitConfig, depth: 1, seed: 7 });
    saveCheckpoint(file, { model: small, optimizer: new AdamW(small.parameters()), step: 3 });
    const m = new ViTClassifier({ ...vitConfig, seed: 8 });
    const opt = new AdamW(m.parameters());
    const w = params(m), o = opt.stateDict(), rngs = m.namedRngs().map(([, r]) => r.getState());
    expect(() => resume(file, { model: m, optimizer: opt })).toThrow(expect.objectContaining({ code: 'ERR_NF_STATE_DICT' }));
    expect(params(m)).toEqual(w);
    expect(opt.stateDict()).toEqual(o);
    expect(m.namedRngs().map(([, r]) => r.getState())).toEqual(rngs);
    const file2 = path.join(tmpDir(), 'sgd.ckpt');
    saveCheckpoint(file2, { model: m, optimizer: new SGD(m.parameters()), step: 1 });
    expect(() => resume(file2, { model: m, optimizer: opt })).toThrow(/optimizer is SGD, not AdamW/);
    expect(() => loadCheckpoint(path.join(tmpDir(), 'missing.ckpt'))).toThrow(expect.objectContaining({ code: 'ERR_NF_INVALID_ARG' }));
  });
});
