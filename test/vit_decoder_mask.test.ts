/**
 * ViTDecoder.forward(memory, { attnMask, keyPaddingMask }): the self-attention masks over the
 * patch positions, forward and backward, against (1) a reference assembled from standalone
 * MultiHeadAttention, LayerNorm and FeedForward modules carrying the decoder's weights, and (2)
 * PyTorch: a [N, N] attnMask blocking later patches must reproduce the causal fixture.
 */
import { afterAll, describe, expect, it } from 'vitest';

import { FeedForward, LayerNorm, Linear, MultiHeadAttention, Tensor, ViTDecoder, type Module } from '../lib';
import { loadFixture } from './fixture';
import { ErrorLog, randn, relErr, rng } from './helpers';

const fwdLog = new ErrorLog(1e-5), bwdLog = new ErrorLog(1e-4);
afterAll(() => {
  fwdLog.report('ViTDecoder with masks, forward');
  bwdLog.report('ViTDecoder with masks, gradients');
});

const cfg = { imgSize: 12, patchSize: 4, inChannels: 2, dModel: 16, numHeads: 4, dFF: 24, depth: 2, seed: 3 };
const B = 2, N = 9, Tm = 5, D = cfg.dModel, PIX = cfg.patchSize * cfg.patchSize * cfg.inChannels;

const f32 = (shape: number[], seed: number) => Tensor.from(Float32Array.from(randn(shape.reduce((a, b) => a * b, 1), rng(seed))), shape);
const add = (a: Tensor, b: Tensor) => Tensor.from(Float32Array.from(a.toArray() as Float32Array, (v, i) => v + (b.toArray() as Float32Array)[i]), a.shape);
const bools = (shape: number[], pick: (i: number) => boolean) =>
  Tensor.from(Uint8Array.from({ length: shape.reduce((a, b) => a * b, 1) }, (_, i) => (pick(i) ? 1 : 0)), shape);

/** Copies the parameters of `from` whose names start with `prefix` into `to`. */
function copyWeights(to: Module, from: ViTDecoder, prefix: string): Module {
  const sd = from.stateDict();
  to.loadStateDict(Object.fromEntries(to.namedParameters().map(([n]) => [n, sd[prefix + n]])));
  return to;
}

/** One pre-LN decoder block built from standalone modules with the decoder's weights. */
function referenceBlock(m: ViTDecoder, i: number) {
  const p = `blocks.${i}.`, c = m.config;
  const ln = (name: string) => copyWeights(new LayerNorm({ dModel: D, eps: c.eps }), m, `${p}${name}.`) as LayerNorm;
  const mha = (name: string) => copyWeights(new MultiHeadAttention({ dModel: D, numHeads: c.numHeads }), m, `${p}${name}.`) as MultiHeadAttention;
  return { prefix: p, norm1: ln('norm1'), attn: mha('attn'), norm2: ln('norm2'), cross_attn: mha('cross_attn'), norm3: ln('norm3'),
    mlp: copyWeights(new FeedForward({ dModel: D, dFF: c.dFF, activation: c.activation }), m, `${p}mlp.`) as FeedForward };
}

/** The decoder's forward and backward spelled out over standalone modules; returns patches, dMemory and every parameter gradient. */
function reference(m: ViTDecoder, memory: Tensor, masks: { attnMask?: Tensor; keyPaddingMask?: Tensor }, dPatches: Tensor) {
  const blocks = Array.from({ length: cfg.depth }, (_, i) => referenceBlock(m, i));
  const norm = copyWeights(new LayerNorm({ dModel: D, eps: m.config.eps }), m, 'norm.') as LayerNorm;
  const pred = copyWeights(new Linear({ inFeatures: D, outFeatures: PIX }), m, 'pred.') as Linear;
  const token = m.mask_token.toArray(), pos = m.pos_embed.toArray();
  let h = Tensor.from(Float32Array.from({ length: B * N * D }, (_, i) => token[i % D] + pos[i % (N * D)]), [B, N, D]);
  for (const b of blocks) {
    const x1 = add(h, b.attn.forward(b.norm1.forward(h), masks));
    const x2 = add(x1, b.cross_attn.forward(b.norm2.forward(x1), { memory }));
    h = add(x2, b.mlp.forward(b.norm3.forward(x2)));
  }
  const patches = pred.forward(norm.forward(h));
  let d = norm.backward(pred.backward(dPatches));
  let dMemory = Tensor.zeros([B, Tm, D]);
  for (const b of [...blocks].reverse()) {
    const dx2 = add(d, b.norm3.backward(b.mlp.backward(d)));
    const cross = b.cross_attn.backward(dx2) as { dx: Tensor; dMemory: Tensor };
    dMemory = add(dMemory, cross.dMemory);
    const dx1 = add(dx2, b.norm2.backward(cross.dx));
    d = add(dx1, b.norm1.backward(b.attn.backward(dx1) as Tensor));
  }
  const dh = d.toArray() as Float32Array;
  const grads: Record<string, Float32Array> = {
    mask_token: Float32Array.from({ length: D }, (_, k) => dh.reduce((s, v, i) => (i % D === k ? s + v : s), 0)),
    pos_embed: Float32Array.from({ length: N * D }, (_, k) => dh.reduce((s, v, i) => (i % (N * D) === k ? s + v : s), 0)),
  };
  const collect = (prefix: string, mod: Module) => mod.namedParameters().forEach(([n, q]) => (grads[prefix + n] = q.grad!.toArray()));
  for (const b of blocks)
    for (const name of ['norm1', 'attn', 'norm2', 'cross_attn', 'norm3', 'mlp'] as const) collect(`${b.prefix}${name}.`, b[name]);
  collect('norm.', norm);
  collect('pred.', pred);
  return { patches: patches.toArray(), dMemory: dMemory.toArray(), grads };
}

describe('ViTDecoder self-attention masks', () => {
  const memory = f32([B, Tm, D], 1), dPatches = f32([B, N, PIX], 2);
  const r = rng(7);
  const masks = {
    '2-d attnMask': { attnMask: bools([N, N], () => r() < 0.3) },
    '3-d attnMask': { attnMask: bools([B, N, N], () => r() < 0.3) },
    keyPaddingMask: { keyPaddingMask: bools([B, N], (i) => i % N >= 6 || i === 2) },
    'attnMask and keyPaddingMask': { attnMask: bools([N, N], (i) => Math.floor(i / N) < i % N), keyPaddingMask: bools([B, N], (i) => i === N + 1) },
  };

  it.each(Object.entries(masks))('%s: forward and backward equal the masked reference of standalone modules', (_, mask) => {
    const m = new ViTDecoder(cfg);
    const patches = m.forward(memory, mask);
    const dMemory = m.backward(dPatches);
    const ref = reference(m, memory, mask, dPatches);
    expect(fwdLog.add('patches vs masked reference', relErr(patches.toArray(), ref.patches))).toBeLessThan(1e-5);
    expect(bwdLog.add('dMemory vs masked reference', relErr(dMemory.toArray(), ref.dMemory))).toBeLessThan(1e-4);
    const named = m.namedParameters();
    expect(named.map(([n]) => n).sort()).toEqual(Object.keys(ref.grads).sort());
    for (const [n, p] of named) expect(bwdLog.add('parameter gradients vs masked reference', relErr(p.grad!.toArray(), ref.grads[n])), n).toBeLessThan(1e-4);
    // The mask matters: without it the output is another one.
    const unmasked = new ViTDecoder(cfg).forward(memory);
    expect(relErr(unmasked.toArray(), ref.patches)).toBeGreaterThan(1e-2);
  });

  it('a [N, N] attnMask blocking later patches reproduces PyTorch causal decoding, forward and backward', () => {
    const fx = loadFixture('vit_decoder_causal');
    const m = new ViTDecoder(fx.config);
    m.loadStateDict(fx.params);
    const n = m.numPatches;
    const later = bools([n, n], (i) => i % n > Math.floor(i / n));
    const patches = m.forward(fx.input('memory'), { attnMask: later, memoryKeyPaddingMask: fx.mask('memoryKeyPaddingMask') });
    expect(fwdLog.add('patches vs PyTorch (causal as attnMask)', relErr(patches.toArray(), fx.f64('output.patches')))).toBeLessThan(1e-5);
    const dMemory = m.backward(fx.input('dpatches'), fx.input('dtokens'));
    expect(bwdLog.add('dMemory vs PyTorch (causal as attnMask)', relErr(dMemory.toArray(), fx.f64('grad.memory')))).toBeLessThan(1e-4);
    for (const [name, p] of m.namedParameters())
      expect(bwdLog.add('parameter gradients vs PyTorch (causal as attnMask)', relErr(p.grad!.toArray(), fx.f64(`grad.param.${name}`))), name).toBeLessThan(1e-4);
  });

  it('rejects masks of the wrong shape, naming the option', () => {
    const m = new ViTDecoder(cfg);
    expect(() => m.forward(memory, { attnMask: bools([N, N + 1], () => false) })).toThrow(/for options\.attnMask but received/);
    expect(() => m.forward(memory, { keyPaddingMask: bools([B, Tm], () => false) })).toThrow(/for options\.keyPaddingMask but received/);
  });
});
