/**
 * Prepacked weights in the modules (lib/core/prepack.ts): in eval mode on the CPU, Linear, FeedForward,
 * MultiHeadAttention (self, cross, decoding), a ViTClassifier and a Transformer (forward and
 * generate) pass their weights prepacked to the ops, packing each once, with outputs bit-identical to
 * unpacked runs on every ISA variant (switching variants repacks); a weight changed after packing
 * (through `data`, copyFrom, fillZero, loadStateDict, an optimizer step in training or in eval mode)
 * is repacked before it is used; train() frees the packings; forwardAsync packs on worker threads;
 * setWeightPrepacking switches it off; Tensor.version counts the writes the library can see.
 */
import { afterEach, describe, expect, it } from 'vitest';

import {
  AdamW, crossEntropy, FeedForward, Linear, Module, MultiHeadAttention, native, SGD, setWeightPrepacking, Tensor, Transformer,
  ViTClassifier, weightPrepacking,
} from '../lib/index';
import { declaredOps } from '../lib/core/device';
import { HOST_ONLY_OPS } from '../lib/native/ops.generated';
import { isas, randn32, rng, withIsa } from './helpers';
import { opsCalledList, opsCalledListAsync } from './support/ops_called';

afterEach(() => setWeightPrepacking(true));

const floats = (shape: number[], seed: number, scale = 1) =>
  Tensor.from(Float32Array.from(randn32(shape.reduce((a, b) => a * b, 1), rng(seed), scale)), shape);
const ints = (shape: number[], vocab: number, seed: number) =>
  Tensor.from(Int32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, (_, i) => (i * 7 + seed) % vocab), shape);

/** The values of a result (a tensor, or the tensors of a result object), for a bit-for-bit comparison. */
function bits(out: unknown): number[] {
  const ts = out instanceof Tensor ? [out] : Object.values(out as object).filter((v): v is Tensor => v instanceof Tensor);
  return ts.flatMap((t) => Array.from(new Int32Array(t.toArray().buffer)));
}

/** `run` with prepacking switched off: the unpacked computation to compare with. */
function unpacked<T>(run: () => T): T {
  setWeightPrepacking(false);
  try {
    return run();
  } finally {
    setWeightPrepacking(true);
  }
}

/**
 * Whether each op that takes prepacked weights got them during `fn`, per weight, for the calls whose
 * weights are the parameters of `m` (a generation step's K|V projection of the memory runs once per
 * sequence on a copy of rows of qkv.weight: no parameter, no packing).
 */
function packingsPassed(m: Module, fn: () => void): { op: string; packed: boolean[] }[] {
  const fields: Record<string, [string, string][]> = {
    linearForward: [['W', 'WPacked']], feedforwardForward: [['W1', 'W1Packed'], ['W2', 'W2Packed']],
    attentionForward: [['qkvWeight', 'qkvWeightPacked'], ['projWeight', 'projWeightPacked']],
    attentionDecode: [['qkvWeight', 'qkvWeightPacked'], ['projWeight', 'projWeightPacked']],
  };
  const params = new Set<unknown>(m.parameters().map((p) => p.storage));
  const addon = native as unknown as Record<string, (a: Record<string, unknown>) => unknown>;
  const seen: { op: string; packed: boolean[] }[] = [];
  const saved = Object.keys(fields).map((op) => [op, addon[op]] as const);
  for (const [op, f] of saved)
    addon[op] = (a) => {
      if (fields[op].every(([w]) => params.has(a[w]))) seen.push({ op, packed: fields[op].map(([, k]) => a[k] instanceof Float32Array) });
      return f(a);
    };
  try {
    fn();
  } finally {
    for (const [op, f] of saved) addon[op] = f;
  }
  return seen;
}

const count = (ops: string[], name: string) => ops.filter((o) => o === name).length;
const linears = (m: Module) => m.modules().filter((c) => c instanceof Linear).length;

const vitConfig = { imgSize: 16, patchSize: 4, inChannels: 3, dModel: 40, numHeads: 4, dFF: 100, depth: 2, numClasses: 10 };
const images = floats([2, 3, 16, 16], 5);

interface Case {
  name: string;
  make: () => Module;
  run: (m: Module) => unknown;
  /** Whether the ops get packings (false: heads padded to another width run on per-call copies of the weights). */
  packs?: boolean;
}

const cases: Case[] = [
  { name: 'Linear (out 20, in 12)', make: () => new Linear({ inFeatures: 12, outFeatures: 20, seed: 1 }),
    run: (m) => (m as Linear).forward(floats([3, 5, 12], 2)) },
  { name: 'FeedForward (D 40, F 100)', make: () => new FeedForward({ dModel: 40, dFF: 100, seed: 2 }),
    run: (m) => (m as FeedForward).forward(floats([2, 7, 40], 3)) },
  { name: 'MultiHeadAttention, self (D 24, causal)', make: () => new MultiHeadAttention({ dModel: 24, numHeads: 3, seed: 3 }),
    run: (m) => (m as MultiHeadAttention).forward(floats([2, 7, 24], 4), { causal: true }) },
  { name: 'MultiHeadAttention, cross (D 24: K|V columns inside a panel)', make: () => new MultiHeadAttention({ dModel: 24, numHeads: 3, seed: 4 }),
    run: (m) => (m as MultiHeadAttention).forward(floats([2, 5, 24], 5), { memory: floats([2, 9, 24], 6) }) },
  { name: 'MultiHeadAttention, cross (D 64: K|V columns on a panel boundary)', make: () => new MultiHeadAttention({ dModel: 64, numHeads: 4, seed: 5 }),
    run: (m) => (m as MultiHeadAttention).forward(floats([2, 5, 64], 7), { memory: floats([2, 9, 64], 8) }) },
  { name: 'MultiHeadAttention, heads padded (headDim 5)', make: () => new MultiHeadAttention({ dModel: 24, numHeads: 3, headDim: 5, seed: 6 }),
    run: (m) => (m as MultiHeadAttention).forward(floats([2, 7, 24], 9)), packs: false },
  { name: 'ViTClassifier', make: () => new ViTClassifier({ ...vitConfig, seed: 7 }), run: (m) => (m as ViTClassifier).forward(images) },
  { name: 'Transformer forward', make: () => new Transformer({ srcVocab: 11, tgtVocab: 13, maxLen: 10, dModel: 64, numHeads: 4, dFF: 96, depth: 2, seed: 8 }),
    run: (m) => (m as Transformer).forward(ints([2, 7], 11, 1), ints([2, 6], 13, 2)) },
  { name: 'Transformer generate (cache, decoding steps)', make: () => new Transformer({ srcVocab: 11, tgtVocab: 13, maxLen: 10, dModel: 40, numHeads: 4, dFF: 72, depth: 2, seed: 9 }),
    run: (m) => (m as Transformer).generate(ints([2, 7], 11, 3), { bos: 1, eos: 2, maxLen: 9 }) },
  { name: 'Transformer generate (beams, no cache)', make: () => new Transformer({ srcVocab: 11, tgtVocab: 13, maxLen: 10, dModel: 40, numHeads: 4, dFF: 72, depth: 1, seed: 10 }),
    run: (m) => (m as Transformer).generate(ints([2, 7], 11, 4), { bos: 1, eos: 2, maxLen: 8, numBeams: 3, useCache: false }) },
];

describe.each(cases)('$name in eval mode', (c) => {
  // One model through every variant in turn: each switch of variant repacks.
  const m = c.make().eval();
  it.each(isas)('%s: packs each weight once, passes the packings, and equals the unpacked result bit for bit', (isa) => {
    withIsa(isa, () => {
      const want = bits(unpacked(() => c.run(m)));
      const first = opsCalledList(() => expect(bits(c.run(m))).toEqual(want));
      expect(count(first, 'packWeights')).toBe(c.packs === false ? 0 : linears(m));
      const passed = packingsPassed(m, () => {
        const again = opsCalledList(() => expect(bits(c.run(m))).toEqual(want));
        expect(count(again, 'packWeights')).toBe(0);
      });
      if (c.packs === false) return expect(passed).toEqual([]); // the ops get padded copies of the weights
      expect(passed.length).toBeGreaterThan(0);
      for (const p of passed) expect(p.packed.every((x) => x), `${p.op} ${p.packed}`).toBe(true);
    });
  });
});

describe('a weight changed after packing is repacked before it is used', () => {
  const model = () => new ViTClassifier({ ...vitConfig, seed: 11 }).eval();
  const check = (m: ViTClassifier) => expect(bits(m.forward(images))).toEqual(bits(unpacked(() => m.forward(images))));
  const qkv = (m: ViTClassifier) => m.blocks[1].attn.qkv.weight;

  it('through data, copyFrom and fillZero', () => {
    const m = model();
    const before = bits(m.forward(images));
    m.head.weight.data[3] += 0.5;
    check(m);
    qkv(m).copyFrom(Float32Array.from(randn32(qkv(m).size, rng(12), 0.2)));
    check(m);
    m.blocks[0].mlp.fc2.weight.fillZero();
    check(m);
    expect(bits(m.forward(images))).not.toEqual(before);
  });

  it('through loadStateDict (the source model keeps its own packings)', () => {
    const m = model(), other = new ViTClassifier({ ...vitConfig, seed: 13 }).eval();
    m.forward(images);
    const otherOut = bits(other.forward(images));
    m.loadStateDict(other.stateDict());
    expect(bits(m.forward(images))).toEqual(otherOut);
    expect(count(opsCalledList(() => other.forward(images)), 'packWeights')).toBe(0); // reading its values was no write
    check(m);
  });

  it('through an optimizer step: train, step, eval', () => {
    const m = model(), opt = new AdamW(m.parameters(), { lr: 0.01 });
    m.forward(images);
    m.train();
    m.zeroGrad();
    m.backward(crossEntropy(m.forward(images), ints([2], 10, 1)).grad);
    opt.step();
    m.eval();
    check(m);
  });

  it('through an optimizer step taken in eval mode (the step bumps the versions), one op over the arena or one per parameter', () => {
    for (const perParameter of [false, true]) {
      const m = model(), opt = new SGD(m.parameters(), { lr: 0.1 });
      if (perParameter) { // parameters at different steps are updated one by one
        const state = opt.stateDict();
        state.state[0].step = 5;
        opt.loadStateDict(state);
      }
      m.forward(images);
      for (const p of m.parameters()) (p.gradData(), p.grad!.data.fill(0.01));
      opt.step();
      check(m);
    }
  });

  it('through an array kept from an earlier read of data only after markWritten()', () => {
    const m = model(), kept = m.head.weight.data;
    const before = bits(m.forward(images));
    kept[0] += 1; // not seen: the documented way is to write through `data` each time
    expect(bits(m.forward(images))).toEqual(before);
    m.head.weight.markWritten();
    check(m);
  });

  it('after a switch of ISA variant (native.setIsa)', () => {
    const m = model();
    for (const isa of isas) withIsa(isa, () => check(m));
  });
});

describe('the packings over the model\'s life', () => {
  it('train() frees them (the next eval forward packs again), eval() alone keeps them', () => {
    const m = new ViTClassifier({ ...vitConfig, seed: 14 }).eval();
    const n = linears(m);
    expect(count(opsCalledList(() => m.forward(images)), 'packWeights')).toBe(n);
    m.eval();
    expect(count(opsCalledList(() => m.forward(images)), 'packWeights')).toBe(0);
    m.train().eval();
    expect(count(opsCalledList(() => m.forward(images)), 'packWeights')).toBe(n);
    m.train();
    const training = packingsPassed(m, () => m.forward(images));
    expect(training.every((p) => p.packed.every((x) => !x))).toBe(true);
  });

  it('forwardAsync packs on worker threads and equals the synchronous unpacked forward', async () => {
    const m = new ViTClassifier({ ...vitConfig, seed: 15 }).eval();
    const want = bits(unpacked(() => m.forward(images)));
    const ops = await opsCalledListAsync(async () => expect(bits(await m.forwardAsync(images))).toEqual(want));
    expect(count(ops, 'packWeights')).toBe(linears(m));
    expect(bits(await m.forwardAsync(images))).toEqual(want);
  });

  it('setWeightPrepacking(false) stops passing packings; it takes only a boolean', () => {
    const m = new FeedForward({ dModel: 40, dFF: 100, seed: 16 }).eval();
    const x = floats([3, 40], 17);
    m.forward(x);
    setWeightPrepacking(false);
    expect(weightPrepacking()).toBe(false);
    expect(packingsPassed(m, () => m.forward(x))).toEqual([{ op: 'feedforwardForward', packed: [false, false] }]);
    expect(() => setWeightPrepacking('off' as unknown as boolean)).toThrow(expect.objectContaining({ code: 'ERR_NF_INVALID_ARG', message: expect.stringMatching(/for on/) }));
  });

  it('packWeights is declared (Linear, MultiHeadAttention) but host-only: the schema marks it, and Module.to asks no device for it', () => {
    const t = new Transformer({ srcVocab: 11, tgtVocab: 13, maxLen: 10, dModel: 16, numHeads: 2, dFF: 24, depth: 1 });
    expect(declaredOps(t.modules()).has('packWeights')).toBe(true);
    expect([...HOST_ONLY_OPS].sort()).toEqual(['fmaPeak', 'packWeights']);
  });
});

describe('Tensor.version', () => {
  it('counts reads of data, copyFrom, fillZero and markWritten; storage, toArray and version itself do not', () => {
    const t = Tensor.zeros([4], 'float32');
    const v0 = t.version;
    void t.storage;
    t.toArray();
    expect(t.version).toBe(v0);
    void t.data;
    expect(t.version).toBe(v0 + 1);
    t.copyFrom(new Float32Array(4));
    t.fillZero();
    t.markWritten();
    expect(t.version).toBe(v0 + 4);
  });
});
