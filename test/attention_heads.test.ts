/**
 * Attention heads narrower than dModel / numHeads (headDim with numHeads·headDim < dModel, numHeads
 * not dividing dModel): MultiHeadAttention against the seeds' PyTorch MultiHeadAttention(d_model,
 * d_k, d_v, num_heads) (test/fixtures/attention_heads.safetensors, from
 * scripts/gen_attention_heads_fixtures.py): outputs within 2e-5 and gradients within 2e-4 of torch's
 * float64 ones, with and without masks, self and cross. Models with such heads train, and
 * Transformer.generate (key/value caches) equals the forward-based greedy result.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { AdamW, EncoderBlock, logSoftmax, MultiHeadAttention, paddingMask, runSync, Tensor, Transformer, ViTClassifier } from '../lib';
import { disposeDecoderState } from '../lib/layers/blocks';
import { parseSafetensors } from '../lib/io/safetensors';
import { trainStep } from '../lib/training/train';
import { maxErr } from './support/pretrained';

const FIXTURE = path.join(__dirname, 'fixtures', 'attention_heads.safetensors');
const report: string[] = [];
afterAll(() => console.log(`narrow heads vs PyTorch, largest error (max |Δ| / max(1, max |ref|)):\n${report.join('\n')}`));

interface CaseConfig { D: number; H: number; Dh: number; B: number; Tq: number; Tk?: number; causal?: boolean }

describe('MultiHeadAttention with narrow heads, against PyTorch', () => {
  const { entries, metadata } = parseSafetensors(fs.readFileSync(FIXTURE));
  const cases = JSON.parse(metadata.cases) as Record<string, CaseConfig>;
  const get = (name: string, key: string) => entries[`${name}.${key}`];
  const input = (name: string, key: string) => {
    const e = get(name, `input.${key}`);
    return e ? Tensor.from(e.data as Float32Array | Uint8Array, e.shape) : undefined;
  };

  it('has the fixtures', () => expect(Object.keys(cases).length).toBeGreaterThanOrEqual(4));

  for (const [name, c] of Object.entries(cases)) {
    it(`${name}: output and gradients (input, memory, parameters) match torch`, () => {
      expect(c.Dh * c.H).toBeLessThan(c.D);
      const m = new MultiHeadAttention({ dModel: c.D, numHeads: c.H, headDim: c.Dh, seed: 5 });
      m.loadStateDict(Object.fromEntries(['qkv.weight', 'qkv.bias', 'proj.weight', 'proj.bias'].map((k) => {
        const e = get(name, `param.${k}`);
        return [k, Tensor.from(e.data as Float32Array, e.shape)];
      })));
      expect(m.qkv.weight.shape).toEqual([3 * c.H * c.Dh, c.D]);
      expect(m.proj.weight.shape).toEqual([c.D, c.H * c.Dh]);
      const x = input(name, 'x')!, memory = input(name, 'memory') as Tensor<'float32'> | undefined;
      const kp = input(name, 'keyPaddingMask'), am = input(name, 'attnMask');
      const y = m.forward(x, { memory, causal: c.causal, keyPaddingMask: kp, attnMask: am });
      const grads = m.backward(input(name, 'dout')!) as Tensor<'float32'> | { dx: Tensor<'float32'>; dMemory: Tensor<'float32'> };
      const ref = (key: string) => Float64Array.from(get(name, key).data as ArrayLike<number>);
      const errY = maxErr(y.data, ref('output.y'));
      const dx = grads instanceof Tensor ? grads : grads.dx;
      let errGrad = maxErr(dx.data, ref('grad.x'));
      if (!(grads instanceof Tensor)) errGrad = Math.max(errGrad, maxErr(grads.dMemory.data, ref('grad.memory')));
      for (const [k, p] of m.namedParameters()) errGrad = Math.max(errGrad, maxErr(p.grad!.data, ref(`grad.${k}`)));
      report.push(`  ${name.padEnd(36)} output ${errY.toExponential(2)}  gradients ${errGrad.toExponential(2)}`);
      expect(errY).toBeLessThan(2e-5);
      expect(errGrad).toBeLessThan(2e-4);
      m.dispose();
    });
  }

  it('refuses a head width that is no positive integer', () => {
    expect(() => new MultiHeadAttention({ dModel: 30, numHeads: 4, headDim: 0 })).toThrow(/config\.headDim/);
    expect(() => new MultiHeadAttention({ dModel: 30, numHeads: 4, headDim: 2.5 })).toThrow(/config\.headDim/);
    expect(() => new MultiHeadAttention({ dModel: 30, numHeads: 4 })).toThrow(/config\.numHeads/);
  });
});

describe('models with narrow heads', () => {
  it('an EncoderBlock and a ViTClassifier train: the loss falls', () => {
    const block = new EncoderBlock({ dModel: 30, numHeads: 4, headDim: 5, dFF: 40, normFirst: true, seed: 2 });
    const x = Tensor.from(Float32Array.from({ length: 2 * 5 * 30 }, (_, i) => Math.sin(i)), [2, 5, 30]);
    const y = block.forward(x);
    expect(y.shape).toEqual([2, 5, 30]);
    const dx = block.backward(Tensor.from(new Float32Array(y.size).fill(0.1), y.shape));
    expect(dx.data.every(Number.isFinite)).toBe(true);
    expect(block.attn.qkv.weight.grad!.data.some((v) => v !== 0)).toBe(true);
    block.dispose();

    const vit = new ViTClassifier({ imgSize: 8, patchSize: 4, inChannels: 1, numClasses: 3, dModel: 40, numHeads: 4, headDim: 6, dFF: 48,
      depth: 2, seed: 3 });
    const opt = new AdamW(vit.parameters(), { lr: 1e-2 });
    const images = Tensor.from(Float32Array.from({ length: 6 * 64 }, (_, i) => Math.cos(i * 0.7)), [6, 1, 8, 8]);
    const labels = Tensor.from(Int32Array.from([0, 1, 2, 0, 1, 2]), [6]);
    const first = trainStep(vit, opt, images, labels);
    let last = first;
    for (let i = 0; i < 10; i++) last = trainStep(vit, opt, images, labels);
    expect(Number.isFinite(first)).toBe(true);
    expect(last).toBeLessThan(first);
    vit.dispose();
    opt.dispose();
  });

  const V = 7, BOS = 1, EOS = 2;
  const src = Tensor.from(Int32Array.from([3, 4, 5, 6, 1, 3, 3, 0]), [2, 4]);
  // dModel 30, 4 heads of width 5 (20 < 30; 4 does not divide 30)
  const model = () => new Transformer({ srcVocab: 7, tgtVocab: V, maxLen: 8, dModel: 30, numHeads: 4, headDim: 5, dFF: 32, depth: 2, seed: 9 });

  it('Transformer: a decoding step with the caches equals forward() on the prefix', () => {
    const m = model();
    m.eval();
    const pad = paddingMask(src, 0);
    const memory = m.encoder.forward(src, { keyPaddingMask: pad }) as Tensor<'float32'>;
    const tokens = [[BOS, 3, 4, 6, 5], [BOS, 5, 5, 3, 2]], T = tokens[0].length;
    const full = m.decoder.forward(Tensor.from(Int32Array.from(tokens.flat()), [2, T]), memory, { memoryKeyPaddingMask: pad }) as Tensor<'float32'>;
    const states = runSync(m.decoder.startDecoding(memory, T, pad));
    let err = 0;
    for (let t = 0; t < T; t++) {
      const step = runSync(m.decoder.decodeStep(Int32Array.from(tokens, (s) => s[t]), t, states));
      for (let b = 0; b < 2; b++)
        err = Math.max(err, maxErr(step.data.subarray(b * V, (b + 1) * V), full.data.subarray((b * T + t) * V, (b * T + t + 1) * V)));
      step.dispose();
    }
    disposeDecoderState(...states);
    expect(err).toBeLessThan(1e-5);
    m.dispose();
  });

  it('Transformer.generate equals a greedy loop over forward() (cached and uncached)', () => {
    const m = model();
    m.eval();
    const want = [0, 1].map((b) => {
      const s = Tensor.from(src.data.slice(b * 4, b * 4 + 4), [1, 4]), pad = paddingMask(s, 0);
      const memory = m.encoder.forward(s, { keyPaddingMask: pad }) as Tensor<'float32'>;
      const seq = [BOS];
      while (seq.length < 8 && seq[seq.length - 1] !== EOS) {
        const logits = m.decoder.forward(Tensor.from(Int32Array.from(seq), [1, seq.length]), memory, { memoryKeyPaddingMask: pad }) as Tensor<'float32'>;
        const last = logSoftmax(logits).data.slice((seq.length - 1) * V, seq.length * V);
        seq.push(last.indexOf(Math.max(...last)));
      }
      return seq;
    });
    const L = Math.max(...want.map((s) => s.length));
    const padded = want.map((s) => [...s, ...Array(L - s.length).fill(0)]);
    const rows = (t: Tensor<'int32'>) => Array.from({ length: t.shape[0] }, (_, b) => Array.from(t.toArray().slice(b * t.shape[1], (b + 1) * t.shape[1])));
    expect(rows(m.generate(src))).toEqual(padded);
    expect(rows(m.generate(src, { useCache: false }))).toEqual(padded);
    m.dispose();
  });
});
