/**
 * Every module against the PyTorch fixtures (test/fixtures, made by scripts/make_fixtures.py):
 * forward outputs within 1e-5 and input and parameter gradients within 1e-4 relative error of
 * the float64 reference.
 */
import { afterAll, describe, expect, it } from 'vitest';

import {
  crossEntropy, Decoder, DecoderBlock, Encoder, EncoderBlock, FeedForward, LayerNorm, MultiHeadAttention,
  PatchEmbedding, Tensor, Transformer, unpatchify, ViTClassifier, ViTDecoder, type Module,
} from '../lib';
import { loadFixture, type Fixture } from './fixture';
import { ErrorLog, relErr } from './helpers';

const fwdLog = new ErrorLog(1e-5), bwdLog = new ErrorLog(1e-4);
afterAll(() => {
  fwdLog.report('modules vs PyTorch, forward');
  bwdLog.report('modules vs PyTorch, gradients');
});

function expectClose(kind: 'fwd' | 'bwd', label: string, got: ArrayLike<number>, want: ArrayLike<number>) {
  const log = kind === 'fwd' ? fwdLog : bwdLog;
  expect(log.add(label, relErr(got, want)), label).toBeLessThan(kind === 'fwd' ? 1e-5 : 1e-4);
}

/** Loads the fixture's parameters (strict: names and shapes must match exactly) and checks every gradient after backward. */
function load(m: Module, fx: Fixture): void {
  m.loadStateDict(fx.params);
}
function expectParamGrads(label: string, m: Module, fx: Fixture) {
  const named = m.namedParameters();
  expect(named.map(([n]) => n).sort()).toEqual(Object.keys(fx.params).sort());
  for (const [name, p] of named) {
    expect(p.grad, `${name}.grad`).not.toBeNull();
    expectClose('bwd', `${label} params`, p.grad!.toArray(), fx.f64(`grad.param.${name}`));
  }
}

const mhaCases = ['mha_self', 'mha_causal', 'mha_key_padding', 'mha_attn_mask_2d', 'mha_attn_mask_3d', 'mha_need_weights', 'mha_cross'];
describe('MultiHeadAttention', () => {
  it.each(mhaCases)('%s', (name) => {
    const fx = loadFixture(name);
    const m = new MultiHeadAttention(fx.config as { dModel: number; numHeads: number });
    load(m, fx);
    const cross = fx.has('input.memory');
    const opts = { memory: cross ? fx.input('memory') : undefined, causal: fx.forward.causal as boolean,
      attnMask: fx.mask('attnMask'), keyPaddingMask: fx.mask('keyPaddingMask') };
    let y: Tensor;
    if (fx.forward.needWeights) {
      const r = m.forward(fx.input('x'), { ...opts, needWeights: true });
      expectClose('fwd', 'MHA weights', r.weights.toArray(), fx.f64('output.weights'));
      y = r.output;
    } else {
      y = m.forward(fx.input('x'), opts);
    }
    expectClose('fwd', 'MHA', y.toArray(), fx.f64('output.y'));
    const g = m.backward(fx.input('dy'));
    if (cross) {
      const { dx, dMemory } = g as { dx: Tensor; dMemory: Tensor };
      expectClose('bwd', 'MHA dx', dx.toArray(), fx.f64('grad.x'));
      expectClose('bwd', 'MHA dMemory', dMemory.toArray(), fx.f64('grad.memory'));
    } else {
      expectClose('bwd', 'MHA dx', (g as Tensor).toArray(), fx.f64('grad.x'));
    }
    expectParamGrads('MHA', m, fx);
  });
});

describe('LayerNorm, FeedForward, PatchEmbedding', () => {
  it.each(['layernorm', 'ffn_gelu', 'ffn_gelu_tanh', 'ffn_relu'])('%s', (name) => {
    const fx = loadFixture(name);
    const m = name === 'layernorm'
      ? new LayerNorm(fx.config as { dModel: number })
      : new FeedForward(fx.config as { dModel: number; dFF: number });
    load(m, fx);
    expectClose('fwd', fx.module, m.forward(fx.input('x')).toArray(), fx.f64('output.y'));
    expectClose('bwd', `${fx.module} dx`, m.backward(fx.input('dy')).toArray(), fx.f64('grad.x'));
    expectParamGrads(fx.module, m, fx);
  });

  it('patch_embedding', () => {
    const fx = loadFixture('patch_embedding');
    const m = new PatchEmbedding(fx.config as { imgSize: number; patchSize: number; inChannels: number; dModel: number });
    load(m, fx);
    expectClose('fwd', 'PatchEmbedding', m.forward(fx.input('images')).toArray(), fx.f64('output.y'));
    expectClose('bwd', 'PatchEmbedding dimages', m.backward(fx.input('dy')).toArray(), fx.f64('grad.images'));
    expectParamGrads('PatchEmbedding', m, fx);
  });
});

describe('EncoderBlock and DecoderBlock', () => {
  it.each(['encoder_block_preln_gelu', 'encoder_block_postln_relu'])('%s', (name) => {
    const fx = loadFixture(name);
    const m = new EncoderBlock(fx.config as { dModel: number; numHeads: number; dFF: number });
    load(m, fx);
    const y = m.forward(fx.input('x'), { causal: fx.forward.causal as boolean, keyPaddingMask: fx.mask('keyPaddingMask') });
    expectClose('fwd', 'EncoderBlock', y.toArray(), fx.f64('output.y'));
    expectClose('bwd', 'EncoderBlock dx', m.backward(fx.input('dy')).toArray(), fx.f64('grad.x'));
    expectParamGrads('EncoderBlock', m, fx);
  });

  it.each(['decoder_block_preln_gelu', 'decoder_block_postln_relu'])('%s', (name) => {
    const fx = loadFixture(name);
    const m = new DecoderBlock(fx.config as { dModel: number; numHeads: number; dFF: number });
    load(m, fx);
    const y = m.forward(fx.input('x'), fx.input('memory'), { causal: true, tgtKeyPaddingMask: fx.mask('tgtKeyPaddingMask'),
      memoryKeyPaddingMask: fx.mask('memoryKeyPaddingMask') });
    expectClose('fwd', 'DecoderBlock', y.toArray(), fx.f64('output.y'));
    const { dx, dMemory } = m.backward(fx.input('dy'));
    expectClose('bwd', 'DecoderBlock dx', dx.toArray(), fx.f64('grad.x'));
    expectClose('bwd', 'DecoderBlock dMemory', dMemory.toArray(), fx.f64('grad.memory'));
    expectParamGrads('DecoderBlock', m, fx);
  });
});

describe('ViT', () => {
  it('ViTClassifier', () => {
    const fx = loadFixture('vit_classifier');
    const m = new ViTClassifier(fx.config);
    load(m, fx);
    expectClose('fwd', 'ViTClassifier', m.forward(fx.input('images')).toArray(), fx.f64('output.y'));
    expectClose('bwd', 'ViTClassifier dimages', m.backward(fx.input('dy')).toArray(), fx.f64('grad.images'));
    expectParamGrads('ViTClassifier', m, fx);
    const maps = m.attentionMaps(fx.input('images'));
    expect(maps.length).toBe(2);
    expect(maps[0].shape).toEqual([fx.input('images').shape[0], 4, 17, 17]);
  });

  it.each(['vit_decoder_causal', 'vit_decoder_parallel'])('%s', (name) => {
    const fx = loadFixture(name);
    const m = new ViTDecoder(fx.config);
    load(m, fx);
    const patches = m.forward(fx.input('memory'), { causal: fx.forward.causal as boolean, memoryKeyPaddingMask: fx.mask('memoryKeyPaddingMask') });
    expectClose('fwd', 'ViTDecoder patches', patches.toArray(), fx.f64('output.patches'));
    expectClose('fwd', 'ViTDecoder tokens', m.tokens!.toArray(), fx.f64('output.tokens'));
    const dMemory = m.backward(fx.input('dpatches'), fx.input('dtokens'));
    expectClose('bwd', 'ViTDecoder dMemory', dMemory.toArray(), fx.f64('grad.memory'));
    expectParamGrads('ViTDecoder', m, fx);
  });

  it('unpatchify', () => {
    const fx = loadFixture('unpatchify');
    const c = fx.config as { imgSize: number; patchSize: number; inChannels: number };
    expect(Array.from(unpatchify(fx.input('patches'), c.imgSize, c.patchSize, c.inChannels).toArray()))
      .toEqual(Array.from(fx.f64('output.y'), Math.fround));
  });
});

describe('Encoder, Decoder, Transformer', () => {
  it.each(['encoder_sinusoidal_postln', 'encoder_learned_preln_scaled'])('%s', (name) => {
    const fx = loadFixture(name);
    const m = new Encoder(fx.config as { vocabSize: number; maxLen: number });
    load(m, fx);
    expectClose('fwd', 'Encoder', m.forward(fx.input('tokens'), { keyPaddingMask: fx.mask('keyPaddingMask') }).toArray(), fx.f64('output.y'));
    m.backward(fx.input('dy'));
    expectParamGrads('Encoder', m, fx);
  });

  it.each(['decoder_sinusoidal_postln_scaled', 'decoder_learned_preln'])('%s', (name) => {
    const fx = loadFixture(name);
    const m = new Decoder(fx.config as { vocabSize: number; maxLen: number });
    load(m, fx);
    const y = m.forward(fx.input('tokens'), fx.input('memory'), { tgtKeyPaddingMask: fx.mask('tgtKeyPaddingMask'),
      memoryKeyPaddingMask: fx.mask('memoryKeyPaddingMask') });
    expectClose('fwd', 'Decoder', y.toArray(), fx.f64('output.y'));
    expectClose('bwd', 'Decoder dMemory', m.backward(fx.input('dy')).toArray(), fx.f64('grad.memory'));
    expectParamGrads('Decoder', m, fx);
  });

  it('transformer', () => {
    const fx = loadFixture('transformer');
    const m = new Transformer(fx.config as { srcVocab: number; tgtVocab: number; maxLen: number });
    load(m, fx);
    expectClose('fwd', 'Transformer', m.forward(fx.input('src'), fx.input('tgt')).toArray(), fx.f64('output.y'));
    m.backward(fx.input('dy'));
    expectParamGrads('Transformer', m, fx);
  });
});

describe('crossEntropy', () => {
  it('label smoothing and ignored targets as F.cross_entropy', () => {
    const fx = loadFixture('cross_entropy');
    const c = fx.config as { labelSmoothing: number; ignoreIndex: number };
    const { loss, grad } = crossEntropy(fx.input('logits'), fx.input('targets'), c);
    expectClose('fwd', 'crossEntropy loss', [loss], fx.f64('output.loss'));
    expectClose('bwd', 'crossEntropy grad', grad.toArray(), fx.f64('grad.logits'));
  });
});

describe('eval mode', () => {
  const config = { imgSize: 8, patchSize: 4, inChannels: 1, numClasses: 3, dModel: 24, numHeads: 2, dFF: 40, depth: 2, dropout: 0.2, seed: 9 };
  const images = () => Tensor.from(Float32Array.from({ length: 2 * 64 }, (_, i) => Math.sin(i * 0.37)), [2, 1, 8, 8]);

  it('keeps no activations, so backward after an eval forward is a clear ERR_NF_STATE', () => {
    const m = new ViTClassifier(config).eval();
    const logits = m.forward(images());
    expect(() => m.backward(Tensor.zeros(logits.shape))).toThrow(
      expect.objectContaining({ code: 'ERR_NF_STATE', message: expect.stringContaining('eval({ keepActivations: true })') }));
    m.dispose();
  });

  it('eval({ keepActivations: true }) backpropagates with dropout off, as train mode with dropout 0 does', () => {
    const a = new ViTClassifier(config).eval({ keepActivations: true }), b = new ViTClassifier({ ...config, dropout: 0 }).train();
    const x = images(), dy = Tensor.from(Float32Array.of(0.3, -1, 0.5, 2, 0.1, -0.4), [2, 3]);
    expect(Array.from(a.forward(x).toArray())).toEqual(Array.from(b.forward(x).toArray()));
    expect(Array.from(a.backward(dy).toArray())).toEqual(Array.from(b.backward(dy).toArray()));
    expect(a.parameters().map((p) => Array.from(p.grad!.toArray()))).toEqual(b.parameters().map((p) => Array.from(p.grad!.toArray())));
    expect(() => a.eval({ keepActivations: 'yes' as never })).toThrow(/Expected a boolean for options.keepActivations/);
    for (const m of [a, b]) m.dispose();
  });
});

describe('Module methods', () => {
  it('are ordinary prototype methods: the method a reader sees is the method that runs', () => {
    const vit = new ViTClassifier({ imgSize: 8, patchSize: 4, inChannels: 1, dModel: 8, numHeads: 2, dFF: 8, depth: 1, numClasses: 3 });
    const attn = new MultiHeadAttention({ dModel: 8, numHeads: 2 });
    for (const m of [vit, attn, ...vit.modules()])
      for (const k of ['forward', 'backward', 'forwardAsync', 'backwardAsync', 'forwardOps', 'backwardOps', 'forwardProgram', 'backwardProgram'])
        expect(Object.hasOwn(m, k), `${m.modulePath}.${k}`).toBe(false);
    const base = Object.getPrototypeOf(Object.getPrototypeOf(ViTClassifier.prototype)); // ViTEncoder → Module
    expect(vit.forward).toBe(base.forward);
    expect(vit.forwardOps).toBe(base.forwardOps);
    expect(vit.forwardProgram).toBe(ViTClassifier.prototype.forwardProgram);
    expect(attn.forward).toBe(MultiHeadAttention.prototype.forward); // its overloads, delegating to Module's
    // The checks (ERR_NF_STATE for a backward without a forward) live in the base class's backwardOps.
    expect(() => vit.backward(Tensor.zeros([1, 3]))).toThrow(expect.objectContaining({ code: 'ERR_NF_STATE' }));
    vit.dispose();
    expect(() => vit.forward(Tensor.zeros([1, 1, 8, 8]))).toThrow(expect.objectContaining({ code: 'ERR_NF_DISPOSED' }));
  });
});
