/**
 * Training matches PyTorch step by step (10 AdamW steps of a ViTClassifier and a Transformer),
 * checkpoints round-trip, and torch.nn.TransformerEncoder checkpoints load through fromTorchTransformer.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { describe, expect, it } from 'vitest';

import {
  AdamW, crossEntropy, Encoder, fromTorchTransformer, loadSafetensors, saveSafetensors, Tensor, Transformer, ViTClassifier,
} from '../lib';
import { loadFixture } from './fixture';
import { relErr } from './helpers';

/**
 * Final parameters against PyTorch's. The key bias (rows D..2D-1 of qkv.bias) is left out: it
 * adds the same q·b to every score of a query row, which softmax cancels, so its true gradient is
 * exactly 0 and AdamW's normalised update follows rounding noise (1e-17 in float64, 1e-8 in
 * float32: m/(sqrt(v)+eps) then moves it by ~lr here and ~0 there).
 */
function expectFinalParams(named: [string, { toArray(): Float32Array }][], want: (k: string) => Float64Array) {
  for (const [name, p] of named) {
    const got = Float64Array.from(p.toArray()), ref = want(`final.${name}`);
    if (name.endsWith('attn.qkv.bias')) {
      const D = got.length / 3;
      got.fill(0, D, 2 * D);
      ref.fill(0, D, 2 * D);
    }
    expect(relErr(got, ref), name).toBeLessThan(1e-4);
  }
}

/** Step s of a [steps, ...] input, as a tensor. */
function stepOf(t: Tensor, s: number): Tensor {
  const inner = t.shape.slice(1), n = inner.reduce((a, b) => a * b, 1);
  return Tensor.from(t.data.subarray(s * n, (s + 1) * n) as Float32Array, inner);
}

describe('training reproduces PyTorch', () => {
  it('ViTClassifier: 10 AdamW steps', () => {
    const fx = loadFixture('train_vit_classifier');
    const tr = fx.training as { lr: number; weightDecay: number; betas: [number, number]; eps: number; steps: number };
    const m = new ViTClassifier(fx.config);
    m.loadStateDict(fx.params);
    const opt = new AdamW(m.parameters(), { lr: tr.lr, weightDecay: tr.weightDecay, betas: tr.betas, eps: tr.eps });
    const images = fx.input('images'), labels = fx.input('labels'), want = fx.f64('output.losses');
    const losses: number[] = [];
    for (let s = 0; s < tr.steps; s++) {
      opt.zeroGrad();
      const { loss, grad } = crossEntropy(m.forward(stepOf(images, s)), stepOf(labels, s));
      losses.push(loss);
      m.backward(grad);
      opt.step();
    }
    for (let s = 0; s < tr.steps; s++) expect(Math.abs(losses[s] - want[s]) / Math.abs(want[s]), `step ${s}`).toBeLessThan(1e-4);
    expectFinalParams(m.namedParameters(), (k) => fx.f64(k));
  });

  it('Transformer: 10 AdamW steps with teacher forcing, label smoothing and ignored padding', () => {
    const fx = loadFixture('train_transformer');
    const tr = fx.training as { lr: number; weightDecay: number; betas: [number, number]; eps: number; steps: number;
      labelSmoothing: number; ignoreIndex: number };
    const m = new Transformer(fx.config as { srcVocab: number; tgtVocab: number; maxLen: number });
    m.loadStateDict(fx.params);
    const opt = new AdamW(m.parameters(), { lr: tr.lr, weightDecay: tr.weightDecay, betas: tr.betas, eps: tr.eps });
    const src = fx.input('src'), tgt = fx.input('tgt'), want = fx.f64('output.losses');
    const [, B, T1] = tgt.shape;
    for (let s = 0; s < tr.steps; s++) {
      const t = stepOf(tgt, s).data as Int32Array;
      const tin = new Int32Array(B * (T1 - 1)), tout = new Int32Array(B * (T1 - 1));
      for (let b = 0; b < B; b++) {
        tin.set(t.subarray(b * T1, (b + 1) * T1 - 1), b * (T1 - 1));
        tout.set(t.subarray(b * T1 + 1, (b + 1) * T1), b * (T1 - 1));
      }
      opt.zeroGrad();
      const logits = m.forward(stepOf(src, s), Tensor.from(tin, [B, T1 - 1]));
      const { loss, grad } = crossEntropy(logits, Tensor.from(tout, [B, T1 - 1]),
        { labelSmoothing: tr.labelSmoothing, ignoreIndex: tr.ignoreIndex });
      expect(Math.abs(loss - want[s]) / Math.abs(want[s]), `step ${s}`).toBeLessThan(1e-4);
      m.backward(grad);
      opt.step();
    }
    expectFinalParams(m.namedParameters(), (k) => fx.f64(k));
  });
});

describe('checkpoints', () => {
  it('a saved model loads into a fresh instance with identical outputs', () => {
    const config = { imgSize: 8, patchSize: 4, inChannels: 1, numClasses: 3, dModel: 16, numHeads: 2, dFF: 24, depth: 2 };
    const a = new ViTClassifier({ ...config, seed: 1 });
    const b = new ViTClassifier({ ...config, seed: 2 });
    const images = Tensor.from(Float32Array.from({ length: 2 * 64 }, (_, i) => Math.sin(i)), [2, 1, 8, 8]);
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'nf-ckpt-')), 'vit.safetensors');
    saveSafetensors(file, a.stateDict(), { config: JSON.stringify(config) });
    expect(Array.from(b.forward(images).toArray())).not.toEqual(Array.from(a.forward(images).toArray()));
    b.loadStateDict(loadSafetensors(file));
    expect(Array.from(b.forward(images).toArray())).toEqual(Array.from(a.forward(images).toArray()));
  });

  it('loadStateDict lists every problem and loads nothing on a mismatch', () => {
    const m = new ViTClassifier({ imgSize: 8, patchSize: 4, numClasses: 3, dModel: 16, numHeads: 2, dFF: 24, depth: 1 });
    const sd = Object.fromEntries(Object.entries(m.stateDict()).map(([k, v]) => [k, v.toArray()]));
    const before = m.head.weight.toArray();
    const bad: Record<string, Float32Array> = { ...sd, 'head.weight': new Float32Array(5), extra: new Float32Array(1) };
    delete bad['norm.bias'];
    bad['head.bias'] = new Float32Array(3).fill(7);
    expect(() => m.loadStateDict(bad)).toThrow(/3 problem\(s\): missing norm.bias \[16\]; head.weight: 5 values do not fit \[3, 16\]; unexpected extra/);
    expect(Array.from(m.head.bias!.toArray())).not.toEqual([7, 7, 7]);
    expect(Array.from(m.head.weight.toArray())).toEqual(Array.from(before));
    expect(() => m.loadStateDict({ ...sd, extra: new Float32Array(1) }, { strict: false })).not.toThrow();
  });
});

describe('fromTorchTransformer', () => {
  it('loads a torch.nn.TransformerEncoder checkpoint that reproduces its output', () => {
    const fx = loadFixture('torch_transformer_encoder');
    const torchRecord = Object.fromEntries(Object.entries(fx.entries).filter(([k]) => k.startsWith('torch.'))
      .map(([k, e]) => [k.slice(6), e.data as Float32Array]));
    const keyMap = JSON.parse(fx.metaRaw.keyMap) as Record<string, string>;
    const mapped = fromTorchTransformer(torchRecord);
    expect(Object.keys(mapped).sort()).toEqual(Object.values(keyMap).sort());
    const enc = new Encoder({ ...(fx.config as object), vocabSize: 1, maxLen: 16 } as { vocabSize: number; maxLen: number });
    enc.loadStateDict(mapped, { strict: false });
    let x: Tensor<'float32'> = fx.input('x') as Tensor<'float32'>;
    for (const blk of enc.blocks) x = blk.forward(x, { keyPaddingMask: fx.mask('keyPaddingMask') });
    expect(relErr(x.toArray(), fx.f64('output.y'))).toBeLessThan(1e-5);
  });
});

describe('Transformer.generate', () => {
  it('with the key/value cache returns the same tokens as recomputing the prefix', () => {
    const fx = loadFixture('transformer');
    const m = new Transformer(fx.config as { srcVocab: number; tgtVocab: number; maxLen: number });
    m.loadStateDict(fx.params);
    const src = fx.input('src');
    const cached = m.generate(src, { bos: 1, eos: 2 });
    const full = m.generate(src, { bos: 1, eos: 2, useCache: false });
    expect(cached.shape).toEqual(full.shape);
    expect(Array.from(cached.toArray())).toEqual(Array.from(full.toArray()));
    expect(cached.shape[1]).toBeGreaterThan(2);
    // Greedy means each token is the argmax of the full forward on the prefix before it.
    const B = cached.shape[0], L = cached.shape[1], V = m.config.tgtVocab;
    const logits = m.forward(src, Tensor.from(cached.toArray().slice(), [B, L])).toArray();
    const ids = cached.toArray();
    for (let b = 0; b < B; b++)
      for (let t = 0; t + 1 < L; t++) {
        if (ids[b * L + t] === 2 || ids[b * L + t] === 0) break;
        const row = logits.subarray((b * L + t) * V, (b * L + t + 1) * V);
        expect(ids[b * L + t + 1]).toBe(row.indexOf(Math.max(...row)));
      }
  });

  it('rejects bad options', () => {
    const m = new Transformer({ srcVocab: 5, tgtVocab: 5, maxLen: 4, dModel: 8, numHeads: 2, dFF: 8, depth: 1 });
    const src = Tensor.from(Int32Array.from([1, 2, 3]), [1, 3]);
    expect(() => m.generate(src, { maxLen: 9 })).toThrow(/for options.maxLen/);
    expect(() => m.generate(src, { eos: 7 })).toThrow(/for options.eos/);
  });
});
