/**
 * The PyTorch parity tests of test/modules.test.ts, on device 'cuda' through the SIMT emulator:
 * every layer and model built with `device: 'cuda'`, loaded with the fixture's parameters
 * (test/fixtures, made by scripts/make_fixtures.py), run forward and backward on cuda inputs, and
 * held to the same tolerances against the float64 PyTorch reference: forward 1e-5, input and
 * parameter gradients 1e-4. Skipped where the emulator cannot be built (see cuda_emu_build.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import {
  crossEntropy, Decoder, DecoderBlock, Encoder, EncoderBlock, FeedForward, LayerNorm, MultiHeadAttention, PatchEmbedding,
  Transformer, ViTClassifier, ViTDecoder, type Module, type Tensor,
} from '../lib';
import { cuda } from '../lib/core/device';
import { loadFixture, type Fixture } from './fixture';
import { ErrorLog, relErr } from './helpers';
import { buildEmulated, emulatorSkipReason } from './support/cuda_emu_build';

const reason = emulatorSkipReason();
if (reason) console.log(`skipping the PyTorch parity tests on cuda: ${reason}`);

const fwdLog = new ErrorLog(1e-5), bwdLog = new ErrorLog(1e-4);

function expectClose(kind: 'fwd' | 'bwd', label: string, got: ArrayLike<number>, want: ArrayLike<number>) {
  const log = kind === 'fwd' ? fwdLog : bwdLog;
  expect(log.add(label, relErr(got, want)), label).toBeLessThan(kind === 'fwd' ? 1e-5 : 1e-4);
}

/** The fixture's inputs and masks, copied to cuda. */
const on = (fx: Fixture) => ({
  input: (n: string) => fx.input(n).to('cuda'),
  mask: (n: string) => fx.mask(n)?.to('cuda'),
});

function check(label: string, m: Module, fx: Fixture, outputs: [string, Tensor | undefined, string][]) {
  expect(new Set(m.parameters().map((p) => p.device))).toEqual(new Set(['cuda']));
  for (const [what, t, key] of outputs) {
    expect(t?.device, `${label} ${what}`).toBe('cuda');
    expectClose(what.startsWith('d') ? 'bwd' : 'fwd', `${label} ${what}`, t!.toArray(), fx.f64(key));
  }
  for (const [name, p] of m.namedParameters()) expectClose('bwd', `${label} params`, p.grad!.toArray(), fx.f64(`grad.param.${name}`));
  m.dispose();
}

function build<M extends Module>(make: (config: object) => M, fx: Fixture): M {
  const m = make({ ...fx.config, device: 'cuda' });
  m.loadStateDict(fx.params);
  return m;
}

describe.skipIf(reason !== null)('modules on cuda (SIMT emulator) against the PyTorch fixtures', () => {
  beforeAll(async () => {
    const b = await buildEmulated();
    expect(b.ok, b.out).toBe(true);
    process.env.NF_CUDA_BACKEND = 'emulator';
    expect(cuda().backendInfo().emulated).toBe(true);
  }, 900_000);

  afterAll(() => {
    fwdLog.report('modules on cuda vs PyTorch, forward');
    bwdLog.report('modules on cuda vs PyTorch, gradients');
  });

  it.each(['mha_self', 'mha_causal', 'mha_key_padding', 'mha_attn_mask_2d', 'mha_attn_mask_3d', 'mha_need_weights', 'mha_cross'])(
    'MultiHeadAttention %s', (name) => {
      const fx = loadFixture(name), d = on(fx);
      const m = build((c) => new MultiHeadAttention(c as { dModel: number; numHeads: number }), fx);
      const cross = fx.has('input.memory');
      const opts = { memory: cross ? d.input('memory') : undefined, causal: fx.forward.causal as boolean,
        attnMask: d.mask('attnMask'), keyPaddingMask: d.mask('keyPaddingMask') };
      const out: [string, Tensor | undefined, string][] = [];
      if (fx.forward.needWeights) {
        const r = m.forward(d.input('x'), { ...opts, needWeights: true });
        out.push(['y', r.output, 'output.y'], ['weights', r.weights, 'output.weights']);
      } else {
        out.push(['y', m.forward(d.input('x'), opts), 'output.y']);
      }
      const g = m.backward(d.input('dy'));
      if (cross) {
        const { dx, dMemory } = g as { dx: Tensor; dMemory: Tensor };
        out.push(['dx', dx, 'grad.x'], ['dMemory', dMemory, 'grad.memory']);
      } else {
        out.push(['dx', g as Tensor, 'grad.x']);
      }
      check('MHA', m, fx, out);
    });

  it.each(['layernorm', 'ffn_gelu', 'ffn_relu', 'patch_embedding'])('%s', (name) => {
    const fx = loadFixture(name), d = on(fx);
    const x = name === 'patch_embedding' ? 'images' : 'x';
    const m = build((c) => name === 'layernorm' ? new LayerNorm(c as never) : name === 'patch_embedding' ? new PatchEmbedding(c as never)
      : new FeedForward(c as never), fx);
    check(fx.module, m, fx, [['y', m.forward(d.input(x)), 'output.y'], [`d${x}`, m.backward(d.input('dy')), `grad.${x}`]]);
  });

  it.each(['encoder_block_preln_gelu', 'decoder_block_postln_relu'])('%s', (name) => {
    const fx = loadFixture(name), d = on(fx);
    if (name.startsWith('encoder')) {
      const m = build((c) => new EncoderBlock(c as never), fx);
      const y = m.forward(d.input('x'), { causal: fx.forward.causal as boolean, keyPaddingMask: d.mask('keyPaddingMask') });
      check('EncoderBlock', m, fx, [['y', y, 'output.y'], ['dx', m.backward(d.input('dy')), 'grad.x']]);
    } else {
      const m = build((c) => new DecoderBlock(c as never), fx);
      const y = m.forward(d.input('x'), d.input('memory'), { causal: true, tgtKeyPaddingMask: d.mask('tgtKeyPaddingMask'),
        memoryKeyPaddingMask: d.mask('memoryKeyPaddingMask') });
      const { dx, dMemory } = m.backward(d.input('dy'));
      check('DecoderBlock', m, fx, [['y', y, 'output.y'], ['dx', dx, 'grad.x'], ['dMemory', dMemory, 'grad.memory']]);
    }
  });

  it('ViTClassifier', () => {
    const fx = loadFixture('vit_classifier'), d = on(fx);
    const m = build((c) => new ViTClassifier(c), fx);
    const y = m.forward(d.input('images'));
    check('ViTClassifier', m, fx, [['y', y, 'output.y'], ['dimages', m.backward(d.input('dy')), 'grad.images']]);
  });

  it.each(['vit_decoder_causal', 'vit_decoder_parallel'])('%s', (name) => {
    const fx = loadFixture(name), d = on(fx);
    const m = build((c) => new ViTDecoder(c), fx);
    const patches = m.forward(d.input('memory'), { causal: fx.forward.causal as boolean, memoryKeyPaddingMask: d.mask('memoryKeyPaddingMask') });
    const tokens = m.tokens!;
    const dMemory = m.backward(d.input('dpatches'), d.input('dtokens'));
    check('ViTDecoder', m, fx, [['patches', patches, 'output.patches'], ['tokens', tokens, 'output.tokens'], ['dMemory', dMemory, 'grad.memory']]);
  });

  it.each(['encoder_sinusoidal_postln', 'encoder_learned_preln_scaled'])('%s', (name) => {
    const fx = loadFixture(name), d = on(fx);
    const m = build((c) => new Encoder(c as never), fx);
    const y = m.forward(d.input('tokens'), { keyPaddingMask: d.mask('keyPaddingMask') });
    m.backward(d.input('dy'));
    check('Encoder', m, fx, [['y', y, 'output.y']]);
  });

  it.each(['decoder_sinusoidal_postln_scaled', 'decoder_learned_preln'])('%s', (name) => {
    const fx = loadFixture(name), d = on(fx);
    const m = build((c) => new Decoder(c as never), fx);
    const y = m.forward(d.input('tokens'), d.input('memory'), { tgtKeyPaddingMask: d.mask('tgtKeyPaddingMask'),
      memoryKeyPaddingMask: d.mask('memoryKeyPaddingMask') });
    check('Decoder', m, fx, [['y', y, 'output.y'], ['dMemory', m.backward(d.input('dy')), 'grad.memory']]);
  });

  it('transformer', () => {
    const fx = loadFixture('transformer'), d = on(fx);
    const m = build((c) => new Transformer(c as never), fx);
    const y = m.forward(d.input('src'), d.input('tgt'));
    m.backward(d.input('dy'));
    check('Transformer', m, fx, [['y', y, 'output.y']]);
  });

  it('crossEntropy', () => {
    const fx = loadFixture('cross_entropy'), d = on(fx);
    const { loss, grad } = crossEntropy(d.input('logits'), d.input('targets'), fx.config as { labelSmoothing: number; ignoreIndex: number });
    expectClose('fwd', 'crossEntropy loss', [loss], fx.f64('output.loss'));
    expect(grad.device).toBe('cuda');
    expectClose('bwd', 'crossEntropy grad', grad.toArray(), fx.f64('grad.logits'));
  });
});
