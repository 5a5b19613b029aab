/**
 * The Promise forms: every module's forwardAsync/backwardAsync gives bit for bit the results of
 * forward/backward (dropout included), calls on one model are queued in order, different models
 * run concurrently, trainStepAsync equals trainStep, and disposal while an op is in flight is safe.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { describe, expect, it } from 'vitest';

import {
  AdamW, Decoder, DecoderBlock, Encoder, EncoderBlock, FeedForward, LayerNorm, Linear, loadSafetensors, loadSafetensorsAsync,
  Module, mseOps, MultiHeadAttention, native, op, PatchEmbedding, saveSafetensors, SGD, Tensor, trainStep, trainStepAsync,
  Transformer, ViTClassifier, ViTDecoder, type Program,
} from '../lib';
import { Random } from '../lib/core/random';

const rng = new Random(7);
const randn = (shape: number[]) => Tensor.from(rng.normalArray(shape.reduce((a, b) => a * b, 1), 1), shape);
const ids = (shape: number[], hi: number) => Tensor.from(Int32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => 1 + (rng.u32() % (hi - 1))), shape);
const bools = (rows: number[][]) => Tensor.from(Uint8Array.from(rows.flat()), [rows.length, rows[0].length]);

/** Every tensor in a result (a tensor, an object of tensors, or nothing), as arrays. */
function arrays(v: unknown): number[][] {
  if (v instanceof Tensor) return [Array.from(v.toArray() as ArrayLike<number>)];
  if (v && typeof v === 'object') return Object.values(v).flatMap(arrays);
  return [];
}
const grads = (m: Module) => m.parameters().map((p) => Array.from(p.grad?.toArray() ?? []));

type Call = (m: Module, args: unknown[]) => unknown;
const call = (name: 'forward' | 'backward' | 'forwardAsync' | 'backwardAsync'): Call =>
  (m, args) => (m[name] as unknown as (...a: unknown[]) => unknown).apply(m, args);

const block = { dModel: 8, numHeads: 2, dFF: 12, dropout: 0.1 };
const vit = { imgSize: 8, patchSize: 4, inChannels: 1, dModel: 8, numHeads: 2, dFF: 16, depth: 2, dropout: 0.1 };
const seq = { dModel: 8, numHeads: 2, dFF: 16, depth: 2, dropout: 0.1 };
const cases: { name: string; make: () => Module; inputs: () => unknown[] }[] = [
  { name: 'Linear', make: () => new Linear({ inFeatures: 6, outFeatures: 5, seed: 1 }), inputs: () => [randn([2, 3, 6])] },
  { name: 'LayerNorm', make: () => new LayerNorm({ dModel: 8 }), inputs: () => [randn([3, 8])] },
  { name: 'MultiHeadAttention self, causal', make: () => new MultiHeadAttention({ dModel: 8, numHeads: 2, dropout: 0.1, seed: 2 }),
    inputs: () => [randn([2, 5, 8]), { causal: true }] },
  { name: 'MultiHeadAttention cross', make: () => new MultiHeadAttention({ dModel: 8, numHeads: 2, seed: 3 }),
    inputs: () => [randn([2, 5, 8]), { memory: randn([2, 4, 8]) }] },
  { name: 'FeedForward', make: () => new FeedForward({ dModel: 8, dFF: 12, dropout: 0.1, seed: 4 }), inputs: () => [randn([2, 3, 8])] },
  { name: 'PatchEmbedding', make: () => new PatchEmbedding({ imgSize: 8, patchSize: 4, inChannels: 2, dModel: 8, seed: 5 }),
    inputs: () => [randn([2, 2, 8, 8])] },
  { name: 'EncoderBlock pre-LN', make: () => new EncoderBlock({ ...block, seed: 6 }),
    inputs: () => [randn([2, 5, 8]), { keyPaddingMask: bools([[0, 0, 0, 1, 1], [0, 0, 0, 0, 0]]) }] },
  { name: 'EncoderBlock post-LN', make: () => new EncoderBlock({ ...block, normFirst: false, seed: 7 }), inputs: () => [randn([2, 5, 8])] },
  { name: 'DecoderBlock pre-LN', make: () => new DecoderBlock({ ...block, seed: 8 }), inputs: () => [randn([2, 5, 8]), randn([2, 3, 8])] },
  { name: 'DecoderBlock post-LN', make: () => new DecoderBlock({ ...block, normFirst: false, seed: 9 }),
    inputs: () => [randn([2, 5, 8]), randn([2, 3, 8])] },
  { name: 'ViTClassifier', make: () => new ViTClassifier({ ...vit, numClasses: 3, seed: 10 }), inputs: () => [randn([2, 1, 8, 8])] },
  { name: 'ViTDecoder', make: () => new ViTDecoder({ ...vit, seed: 11 }), inputs: () => [randn([2, 5, 8]), { causal: true }] },
  { name: 'Encoder', make: () => new Encoder({ ...seq, vocabSize: 7, maxLen: 6, normFirst: true, seed: 12 }),
    inputs: () => [ids([2, 5], 7), { keyPaddingMask: bools([[0, 0, 0, 1, 1], [0, 0, 0, 0, 0]]) }] },
  { name: 'Decoder', make: () => new Decoder({ ...seq, vocabSize: 9, maxLen: 6, positional: 'learned', seed: 13 }),
    inputs: () => [ids([2, 5], 9), randn([2, 4, 8])] },
  { name: 'Transformer', make: () => new Transformer({ ...seq, srcVocab: 7, tgtVocab: 9, maxLen: 6, seed: 14 }),
    inputs: () => [ids([2, 5], 7), ids([2, 4], 9)] },
];

describe('forwardAsync and backwardAsync', () => {
  it.each(cases)('$name: bit for bit the synchronous results', async ({ make, inputs }) => {
    const a = make(), b = make(), args = inputs();
    for (let step = 0; step < 2; step++) {
      const y = call('forward')(a, args) as Tensor;
      const yAsync = (await call('forwardAsync')(b, args)) as Tensor;
      expect(arrays(yAsync)).toEqual(arrays(y));
      const dy = randn([...y.shape]);
      expect(arrays(await call('backwardAsync')(b, [dy]))).toEqual(arrays(call('backward')(a, [dy])));
      expect(grads(b)).toEqual(grads(a));
    }
  });

  it('a custom module written once as a program gets both forms', async () => {
    /** y = inner(x) / 2. */
    class Halved extends Module {
      readonly inner = this.addModule('inner', new Linear({ inFeatures: 4, outFeatures: 3, seed: 1 }));
      *forwardProgram(x: Tensor): Program<Tensor<'float32'>> {
        const y = yield* this.inner.forwardOps(x);
        yield* op('scale', { n: y.size, x: y.data, s: 0.5 });
        return y;
      }
      *backwardProgram(dy: Tensor<'float32'>): Program<Tensor<'float32'>> {
        const d = Tensor.from(dy.data, dy.shape);
        yield* op('scale', { n: d.size, x: d.data, s: 0.5 });
        const dx = yield* this.inner.backwardOps(d);
        d.dispose();
        return dx;
      }
    }
    const a = new Halved(), b = new Halved(), x = randn([2, 4]), dy = randn([2, 3]) as Tensor<'float32'>;
    expect(Array.from((await b.forwardAsync(x)).toArray())).toEqual(Array.from(a.forward(x).toArray()));
    expect(Array.from((await b.backwardAsync(dy)).toArray())).toEqual(Array.from(a.backward(dy).toArray()));
    expect(grads(b)).toEqual(grads(a));
  });

  it('Transformer.generateAsync returns what generate returns', async () => {
    const m = new Transformer({ ...seq, srcVocab: 7, tgtVocab: 9, maxLen: 6, seed: 14 });
    const src = ids([3, 5], 7);
    expect(Array.from((await m.generateAsync(src, { bos: 1, eos: 2 })).toArray())).toEqual(Array.from(m.generate(src, { bos: 1, eos: 2 }).toArray()));
  });

  it('queues the calls on one model in order and refuses synchronous calls meanwhile', async () => {
    const make = () => new EncoderBlock({ ...block, seed: 20 });
    const a = make(), b = make();
    const x1 = randn([2, 5, 8]), x2 = randn([2, 5, 8]), dy1 = randn([2, 5, 8]), dy2 = randn([2, 5, 8]);
    // Queued without awaiting: each call must see the forward before it, as in the synchronous order.
    const pending = [b.forwardAsync(x1), b.backwardAsync(dy1), b.forwardAsync(x2), b.backwardAsync(dy2)];
    expect(() => b.forward(x1)).toThrow(expect.objectContaining({ code: 'ERR_NF_STATE' }));
    expect(() => b.norm1.forward(x1)).toThrow(expect.objectContaining({ code: 'ERR_NF_STATE' })); // children share the queue
    expect(() => b.dispose()).toThrow(expect.objectContaining({ code: 'ERR_NF_STATE' }));
    const got = await Promise.all(pending);
    const want = [a.forward(x1), a.backward(dy1), a.forward(x2), a.backward(dy2)];
    expect(got.flatMap(arrays)).toEqual(want.flatMap(arrays));
    expect(grads(b)).toEqual(grads(a));
    expect(() => b.forward(x1)).not.toThrow();
  });

  it('keeps the optimizer busy while trainStepAsync uses it: its own calls queue, synchronous ones throw', async () => {
    const make = () => new ViTClassifier({ ...vit, numClasses: 3, seed: 21 });
    const a = make(), b = make();
    const optA = new AdamW(a.parameters(), { lr: 1e-2 }), optB = new AdamW(b.parameters(), { lr: 1e-2 });
    const x = randn([2, 1, 8, 8]), y = Tensor.from(Int32Array.from([0, 2]), [2]);
    const step = trainStepAsync(b, optB, x, y);
    for (const f of [() => optB.step(), () => optB.zeroGrad(), () => optB.dispose(), () => trainStep(make(), optB, x, y)])
      expect(f).toThrow(expect.objectContaining({ code: 'ERR_NF_STATE' }));
    const extra = optB.stepAsync(); // queued behind the step: applies the step's gradients a second time
    await Promise.all([step, extra]);
    trainStep(a, optA, x, y);
    optA.step();
    expect(a.parameters().map((p) => Array.from(p.toArray()))).toEqual(b.parameters().map((p) => Array.from(p.toArray())));
    expect(() => optB.step()).not.toThrow();
  });

  it('a failing call rejects and the queue goes on', async () => {
    const m = new Linear({ inFeatures: 4, outFeatures: 2 });
    const bad = m.forwardAsync(randn([3, 5]));
    const good = m.forwardAsync(randn([3, 4]));
    await expect(bad).rejects.toMatchObject({ code: 'ERR_NF_INVALID_ARG' });
    expect((await good).shape).toEqual([3, 2]);
  });

  it('runs different models concurrently: a small model is not held up by a large one', async () => {
    const big = new ViTClassifier({ imgSize: 32, patchSize: 4, inChannels: 1, dModel: 96, numHeads: 4, dFF: 384, depth: 3 });
    const small = new Linear({ inFeatures: 4, outFeatures: 2 });
    const order: string[] = [];
    const pBig = big.forwardAsync(randn([8, 1, 32, 32])).then(() => order.push('big'));
    const pSmall = small.forwardAsync(randn([1, 4])).then(() => order.push('small'));
    await Promise.all([pBig, pSmall]);
    expect(order).toEqual(['small', 'big']);
  });
});

describe('trainStepAsync', () => {
  it('ViTClassifier with AdamW: the losses and weights of trainStep, bit for bit', async () => {
    const make = () => new ViTClassifier({ ...vit, numClasses: 3, seed: 30 });
    const a = make(), b = make();
    const oa = new AdamW(a.parameters(), { lr: 1e-2 }), ob = new AdamW(b.parameters(), { lr: 1e-2 });
    for (let s = 0; s < 4; s++) {
      const x = randn([4, 1, 8, 8]), y = ids([4], 3);
      const la = trainStep(a, oa, x, y, { maxGradNorm: 1 });
      const lb = await trainStepAsync(b, ob, x, y, { maxGradNorm: 1 });
      expect(lb).toBe(la);
    }
    expect(b.parameters().map((p) => Array.from(p.toArray()))).toEqual(a.parameters().map((p) => Array.from(p.toArray())));
  });

  it('Transformer with [src, tgt] inputs, and ViTDecoder with an mse loss program and SGD', async () => {
    const t1 = new Transformer({ ...seq, srcVocab: 7, tgtVocab: 9, maxLen: 6, seed: 31 });
    const t2 = new Transformer({ ...seq, srcVocab: 7, tgtVocab: 9, maxLen: 6, seed: 31 });
    const src = ids([2, 5], 7), tgt = ids([2, 4], 9), out = ids([2, 4], 9);
    const o1 = new AdamW(t1.parameters()), o2 = new AdamW(t2.parameters());
    expect(await trainStepAsync(t2, o2, [src, tgt], out)).toBe(trainStep(t1, o1, [src, tgt], out));

    const d1 = new ViTDecoder({ ...vit, seed: 32 }), d2 = new ViTDecoder({ ...vit, seed: 32 });
    const memory = randn([2, 3, 8]), target = randn([2, 4, 16]);
    const s1 = new SGD(d1.parameters(), { lr: 0.1, momentum: 0.9 }), s2 = new SGD(d2.parameters(), { lr: 0.1, momentum: 0.9 });
    for (let s = 0; s < 2; s++)
      expect(await trainStepAsync(d2, s2, memory, target, { loss: mseOps })).toBe(trainStep(d1, s1, memory, target, { loss: mseOps }));
  });
});

describe('memory safety of asynchronous ops', () => {
  it('disposing a tensor while an op reads and writes it defers the free until the op settles', async () => {
    const rows = 4096, D = 256;
    const x = randn([rows, D]), out = Tensor.zeros([rows, D]);
    const gamma = Tensor.from(new Float32Array(D).fill(1), [D]), beta = Tensor.zeros([D]);
    const mean = new Float32Array(rows), rstd = new Float32Array(rows);
    const p = native.layernormForwardAsync({ rows, D, out: out.data, mean, rstd, x: x.data, gamma: gamma.data, beta: beta.data });
    x.dispose();
    out.dispose();
    expect(x.disposed && out.disposed).toBe(true);
    await p;
    expect(rstd.every((v) => v > 0)).toBe(true);
  });

  it('a model disposed after its calls settle frees everything; using frees at the end of the block', async () => {
    const m = new ViTClassifier({ ...vit, numClasses: 3 });
    const opt = new AdamW(m.parameters());
    await trainStepAsync(m, opt, randn([2, 1, 8, 8]), ids([2], 3));
    m.dispose();
    opt.dispose();
    expect(m.parameters().every((p) => p.disposed && p.grad === null)).toBe(true);
    await expect(m.forwardAsync(randn([2, 1, 8, 8]))).rejects.toMatchObject({ code: 'ERR_NF_DISPOSED' });
    let kept: Linear;
    {
      using lin = new Linear({ inFeatures: 2, outFeatures: 2 });
      kept = lin;
      expect(lin.weight.disposed).toBe(false);
    }
    expect(kept.weight.disposed).toBe(true);
  });
});

describe('loadSafetensorsAsync', () => {
  it('reads what loadSafetensors reads, and rejects a missing file', async () => {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'nf-async-')), 'w.safetensors');
    saveSafetensors(file, { a: randn([3, 4]), b: ids([5], 9) });
    const sync = loadSafetensors(file), async = await loadSafetensorsAsync(file);
    expect(Object.keys(async).sort()).toEqual(['a', 'b']);
    for (const k of ['a', 'b']) expect(Array.from(async[k].toArray())).toEqual(Array.from(sync[k].toArray()));
    await expect(loadSafetensorsAsync(`${file}.missing`)).rejects.toMatchObject({ code: 'ERR_NF_INVALID_ARG' });
  });
});
