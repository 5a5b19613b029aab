/**
 * Host memory per step (issue 12: garbage-collector work): a training step reuses the buffers of
 * the previous step's activations and of its own freed intermediates (lib/core/recycle.ts) instead of
 * allocating new ArrayBuffers, frees everything it does not return, leaves nothing to the GC, and
 * computes bit for bit what it computes without recycling, synchronously or not.
 *
 * The host buffers tensors take are counted by wrapping native.alignedOffset (called once per
 * tensor with its buffer, new or recycled) and native.release (a free: dispose, or the pool
 * dropping a buffer); a FinalizationRegistry tells which new buffers the GC collected unfreed.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

import { afterEach, describe, expect, it } from 'vitest';

import {
  AdamW, crossEntropy, native, runSync, Tensor, trainStep, trainStepAsync, Transformer, ViTClassifier, ViTDecoder,
  type ViTClassifierConfig,
} from '../lib';
import { Random } from '../lib/core/random';
import { HostPool, setRecycling } from '../lib/core/recycle';
import { paramHash } from './support/param_hash';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** Host buffer traffic while installed: bytes of new buffers, of recycled ones handed out again, freed, and left to the GC. */
class Traffic {
  fresh = 0;
  reused = 0;
  freed = 0;
  leftToGc = 0;
  private readonly seen = new WeakSet<ArrayBuffer>();
  private readonly live = new WeakMap<ArrayBuffer, { bytes: number; freed: boolean }>();
  private readonly collected = new FinalizationRegistry<{ bytes: number; freed: boolean }>((b) => {
    if (!b.freed) this.leftToGc += b.bytes;
  });
  private readonly raw = native as unknown as Record<'alignedOffset' | 'release', (b: ArrayBuffer) => number>;
  private readonly original = { alignedOffset: this.raw.alignedOffset, release: this.raw.release };
  counting = false;

  constructor() {
    this.raw.alignedOffset = (b) => {
      const isNew = !this.seen.has(b);
      this.seen.add(b);
      if (this.counting && isNew) {
        this.fresh += b.byteLength;
        const entry = { bytes: b.byteLength, freed: false };
        this.live.set(b, entry);
        this.collected.register(b, entry);
      } else if (this.counting) {
        this.reused += b.byteLength;
      }
      return this.original.alignedOffset.call(native, b);
    };
    this.raw.release = (b) => {
      const entry = this.live.get(b);
      if (this.counting && b.byteLength > 0) this.freed += b.byteLength;
      if (entry) entry.freed = true;
      return this.original.release.call(native, b);
    };
  }

  uninstall(): void {
    Object.assign(this.raw, this.original);
  }
}

/** Collects garbage and lets the FinalizationRegistry callbacks run. */
async function collect(): Promise<void> {
  for (let i = 0; i < 3; i++) {
    gc();
    await new Promise((r) => setTimeout(r, 0));
  }
}

let traffic: Traffic | null = null;
afterEach(() => {
  traffic?.uninstall();
  traffic = null;
  setRecycling(true);
});

const rng = new Random(11);
const normal = (shape: number[]) => Tensor.from(rng.normalArray(shape.reduce((a, b) => a * b, 1), 1), shape);
const ids = (shape: number[], hi: number) => Tensor.from(Int32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => 1 + (rng.u32() % (hi - 1))), shape);

const VIT: ViTClassifierConfig = { imgSize: 16, patchSize: 4, dModel: 32, numHeads: 2, dFF: 64, depth: 2, numClasses: 5, seed: 3 };
const S2S = { srcVocab: 20, tgtVocab: 20, maxLen: 8, dModel: 32, numHeads: 2, dFF: 64, depth: 2, padIdx: 0, seed: 5 };

interface Case {
  name: string;
  make: (extra?: object) => ViTClassifier | Transformer;
  inputs: Tensor | [Tensor, Tensor];
  targets: Tensor;
}
const images = normal([8, 3, 16, 16]);
const cases: Case[] = [
  { name: 'ViTClassifier', make: (extra = {}) => new ViTClassifier({ ...VIT, ...extra }), inputs: images, targets: ids([8], 5) },
  { name: 'Transformer', make: (extra = {}) => new Transformer({ ...S2S, ...extra }), inputs: [ids([4, 7], 20), ids([4, 6], 20)], targets: ids([4, 6], 20) },
];

/** Trains `model` for `steps` steps (trainStep, or trainStepAsync); returns the losses. */
async function train(c: Case, model: ViTClassifier | Transformer, opt: AdamW, steps: number, async = false): Promise<number[]> {
  const losses: number[] = [];
  for (let i = 0; i < steps; i++)
    losses.push(async ? await trainStepAsync(model as Transformer, opt, c.inputs as never, c.targets) : trainStep(model as Transformer, opt, c.inputs as never, c.targets));
  return losses;
}

describe('step memory', () => {
  for (const c of cases)
    it(`a ${c.name} training step reuses its buffers and leaves no tensor memory to the GC`, async () => {
      const model = c.make(), opt = new AdamW(model.parameters());
      await train(c, model, opt, 3); // warm-up: gradients and optimizer state exist from here on
      traffic = new Traffic();
      await train(c, model, opt, 2);
      traffic.counting = true;
      const steps = 10;
      await train(c, model, opt, steps);
      traffic.counting = false;
      model.dispose();
      opt.dispose();
      await collect();
      const { fresh, reused, freed, leftToGc } = traffic, kib = (b: number) => `${(b / steps / 1024).toFixed(1)} KiB`;
      console.log(`${c.name} per step: ${kib(fresh)} in new buffers, ${kib(reused)} in recycled ones, ${kib(freed)} freed, ` +
        `${kib(leftToGc)} left to the GC`);
      // Without recycling every byte is a new buffer. What is left: the backward's gradients beyond
      // the buffers the forward freed (each run's pool starts empty and is freed when it ends).
      expect(fresh).toBeLessThan(0.25 * (fresh + reused));
      expect(leftToGc).toBe(0);
    });

  it('training gives bit for bit the losses and parameters it gives without recycling, synchronously or not', async () => {
    const extras = [{}, { dropout: 0.1, dropPath: 0.2, initValues: 0.1 }, { dropout: 0.1, normFirst: true }];
    for (const c of cases)
      for (const extra of extras) {
        if (c.name === 'Transformer' && 'dropPath' in extra) continue;
        if (c.name === 'ViTClassifier' && 'normFirst' in extra) continue;
        const run = async (recycle: boolean, async: boolean) => {
          setRecycling(recycle);
          const model = c.make(extra), opt = new AdamW(model.parameters());
          const losses = await train(c, model, opt, 4, async);
          model.eval();
          const out = model instanceof ViTClassifier ? await model.forwardAsync(images) : model.forward(...(c.inputs as [Tensor, Tensor]));
          const result = { losses, params: paramHash(model), out: Array.from(out.data) };
          model.dispose();
          opt.dispose();
          return result;
        };
        const reference = await run(false, false);
        expect(await run(true, false), `${c.name} ${JSON.stringify(extra)}`).toEqual(reference);
        expect(await run(true, true), `${c.name} ${JSON.stringify(extra)} async`).toEqual(reference);
      }
  });

  it('memory stays flat over 200 steps of the README loop, which disposes nothing', async () => {
    const model = new ViTClassifier(VIT), opt = new AdamW(model.parameters());
    const x = images.data, y = Int32Array.from({ length: 8 }, (_, i) => i % 5);
    const step = () => {
      const logits = model.forward(Tensor.from(x, [8, 3, 16, 16]));
      const { grad } = crossEntropy(logits, Tensor.from(y, [8]));
      opt.zeroGrad();
      model.backward(grad);
      opt.step();
    };
    for (let i = 0; i < 20; i++) step();
    traffic = new Traffic();
    const samples: number[] = [];
    for (let i = 1; i <= 200; i++) {
      if (i === 101) traffic.counting = true;
      step();
      if (i % 50 === 0) {
        await collect();
        samples.push(process.memoryUsage().arrayBuffers);
      }
    }
    traffic.counting = false;
    await collect();
    // The loop's own tensors per step: the images, the labels, the logits, their gradient and the
    // images' gradient (model.backward's result), each with its 64 bytes of alignment slack.
    const own = (8 * 3 * 16 * 16 + 8 + 8 * 5 + 8 * 5 + 8 * 3 * 16 * 16) * 4 + 5 * 64;
    console.log(`README loop: live ArrayBuffers after GC every 50 steps ${samples.map((b) => `${(b / 1024).toFixed(0)} KiB`).join(', ')}; ` +
      `${(traffic.leftToGc / 100 / 1024).toFixed(1)} KiB per step left to the GC (the loop's own tensors: ${(own / 1024).toFixed(1)} KiB)`);
    expect(Math.max(...samples) - Math.min(...samples)).toBeLessThan(64 * 1024);
    expect(traffic.leftToGc).toBeLessThanOrEqual(100 * own);
    model.dispose();
    opt.dispose();
  });

  it('a recycled buffer is poisoned again for an uninitialized tensor, zeroed for zeros(), and never outlives its run', () => {
    const before = process.memoryUsage().arrayBuffers;
    runSync((function* () {
      const a = Tensor.empty([1000]);
      a.data.fill(3);
      const buffer = a.data.buffer;
      a.recycle();
      const b = Tensor.empty([1000]);
      expect(b.data.buffer).toBe(buffer);
      expect(b.data.every((v) => Number.isNaN(v))).toBe(true); // the suite sets NF_POISON_UNINITIALIZED
      b.data.fill(3);
      b.recycle();
      const z = Tensor.zeros([1000]);
      expect(z.data.buffer).toBe(buffer);
      expect(z.data.every((v) => v === 0)).toBe(true);
      z.recycle();
      yield* [];
    })());
    expect(process.memoryUsage().arrayBuffers).toBe(before);
    // Outside a run recycle() is dispose(): the memory is freed at once.
    const t = Tensor.empty([1000]), view = t.data;
    t.recycle();
    expect(view.length).toBe(0);
  });

  it('the pool serves a tensor from a buffer of its size or up to twice it, and frees smaller ones on a miss', () => {
    const pool = new HostPool();
    const [a, b, c, d] = [new ArrayBuffer(100), new ArrayBuffer(100), new ArrayBuffer(150), new ArrayBuffer(10)];
    for (const x of [a, b, c]) pool.give(x);
    expect(pool.take(100, true)).toBe(b); // the most recently freed of the size
    expect(pool.take(80, false)).toBe(null); // a zero-filled tensor takes its exact size only
    expect(pool.take(80, true)).toBe(a); // else the smallest of at most twice its size
    expect(pool.take(200, true)).toBe(null); // none fits: the smaller ones are freed
    expect(c.byteLength).toBe(0);
    pool.give(d);
    pool.drain();
    expect(d.byteLength).toBe(0);
  });

  it('a tensor callers see (ViTDecoder.tokens) is detached when freed, never recycled into another', () => {
    const dec = new ViTDecoder({ imgSize: 8, patchSize: 4, inChannels: 1, dModel: 16, numHeads: 2, dFF: 32, depth: 1 });
    const memory = normal([2, 5, 16]);
    dec.forward(memory);
    const view = dec.tokens!.data;
    dec.forward(memory);
    expect(view.length).toBe(0);
    dec.dispose();
  });

  it('a forward that throws leaves nothing for a backward', () => {
    const model = new ViTClassifier(VIT);
    const logits = model.forward(images);
    expect(() => model.forward(Tensor.zeros([8, 3, 16, 15]))).toThrow(expect.objectContaining({ code: 'ERR_NF_INVALID_ARG' }));
    expect(() => model.backward(Tensor.zeros(logits.shape))).toThrow(expect.objectContaining({ code: 'ERR_NF_STATE' }));
    model.dispose();
  });
});
