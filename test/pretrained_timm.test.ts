/**
 * timm VisionTransformer checkpoints (test/fixtures/pretrained/timm_*, from timm 1.0.29 by
 * scripts/gen_pretrained_fixtures.py): loadTimm builds the config from timm's arguments and loads
 * the weights strictly; logits within 2e-5 and gradients (images, parameters) within 2e-4 of timm's
 * in float64. Also resamplePosEmbed against timm's resample_abs_pos_embed.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { fromTimm, loadTimm, timmViTConfig } from '../lib/convert/timm';
import { resamplePosEmbed } from '../lib/convert/resample';
import { ViTClassifier } from '../lib/models/vit';
import { AdamW } from '../lib/training/optim';
import { trainStep, trainStepAsync } from '../lib/training/train';
import { loadSafetensors } from '../lib/io/safetensors';
import { Tensor } from '../lib/core/tensor';
import { maxErr, PRETRAINED, readIo } from './support/pretrained';

const report: string[] = [];
afterAll(() => console.log(`timm fixtures, largest error (max |Δ| / max(1, max |ref|)):\n${report.join('\n')}`));

const cases = fs.readdirSync(PRETRAINED).filter((n) => n.startsWith('timm_'));

describe('timm VisionTransformer', () => {
  it('has the fixtures', () => expect(cases.length).toBeGreaterThanOrEqual(5));

  for (const name of cases) {
    it(`${name}: logits and gradients match timm`, () => {
      const model = loadTimm(path.join(PRETRAINED, name));
      const io = readIo(`${name}/io.safetensors`);
      const images = io.input('images'), dlogits = io.input('dlogits');
      model.train();
      const logits = model.forward(images);
      const errLogits = maxErr(logits.data, io.ref('output.logits'));
      const dimages = model.backward(dlogits);
      const errImages = maxErr(dimages.data, io.ref('grad.images'));
      const params = new Map(model.namedParameters());
      let errParams = 0;
      const gradKeys = Object.keys(io.entries).filter((k) => k.startsWith('grad.param.'));
      expect(gradKeys.length).toBeGreaterThanOrEqual(4);
      for (const key of gradKeys) {
        const p = params.get(key.slice('grad.param.'.length));
        expect(p, key).toBeDefined();
        errParams = Math.max(errParams, maxErr(p!.grad!.data, io.ref(key)));
      }
      report.push(`  ${name.padEnd(32)} logits ${errLogits.toExponential(2)}  d(images) ${errImages.toExponential(2)}  ` +
        `d(params) ${errParams.toExponential(2)}`);
      expect(errLogits).toBeLessThan(2e-5);
      expect(errImages).toBeLessThan(2e-4);
      expect(errParams).toBeLessThan(2e-4);
      for (const t of [images, dlogits, logits, dimages]) t.dispose();
      model.dispose();
    });
  }

  it('maps timm argument names, eps 1e-6 included', () => {
    const c = timmViTConfig({ model_args: { img_size: [8, 12], embed_dim: 24, num_heads: 3, mlp_ratio: 2.5, class_token: false,
      global_pool: 'avg', proj_bias: false, init_values: 1e-5 } });
    expect(c).toMatchObject({ imgSize: [8, 12], dModel: 24, numHeads: 3, dFF: 60, eps: 1e-6, classToken: false, globalPool: 'avg',
      projBias: false, mlpBias: false, initValues: 1e-5, patchSize: 16 });
  });

  it("puts dropout where timm does: attention weights, branches, MLP hidden, embeddings, drop path rising over the blocks", () => {
    const c = timmViTConfig({ attn_drop_rate: 0.1, proj_drop_rate: 0.2, pos_drop_rate: 0.3, drop_path_rate: 0.25, depth: 3, embed_dim: 8,
      num_heads: 2, img_size: 8, patch_size: 4 });
    expect(c).toMatchObject({ attnDropout: 0.1, projDropout: 0.2, hiddenDropout: 0.2, embedDropout: 0.3, dropPath: 0.25 });
    const model = new ViTClassifier(c);
    expect(model.blocks.map((b) => b.config.dropPath)).toEqual([0, Math.fround(0.125), 0.25]);
    expect(model.blocks[1].attn.config.dropout).toBe(0.1);
    expect(model.blocks[1].mlp.config.dropout).toBe(0.2);
    model.dispose();
  });

  it('rejects variants it cannot build and unknown arguments, naming them', () => {
    expect(() => timmViTConfig({ qk_norm: true as false })).toThrow(/timmConfig\.qk_norm/);
    expect(() => timmViTConfig({ drop_rate: 0.1 as 0 })).toThrow(/timmConfig\.drop_rate/);
    expect(() => timmViTConfig({ embed_dims: 8 } as never)).toThrow(/did you mean 'embed_dim'/);
  });

  it('refuses a state dict with a missing or extra parameter (strict)', () => {
    const folder = path.join(PRETRAINED, 'timm_layerscale_noembedclass');
    const args = JSON.parse(fs.readFileSync(path.join(folder, 'config.json'), 'utf8'));
    const weights = loadSafetensors(path.join(folder, 'model.safetensors'));
    const { ['blocks.1.ls2.gamma']: gamma, ...missing } = weights;
    expect(() => fromTimm(missing, args)).toThrow(/missing blocks\.1\.ls2\.gamma/);
    expect(() => fromTimm({ ...weights, 'blocks.9.extra': gamma }, args)).toThrow(/unexpected blocks\.9\.extra/);
    for (const t of Object.values(weights)) t.dispose();
  });

  it('fine-tunes at a new image size: pos_embed resampled as timm does', () => {
    const folder = path.join(PRETRAINED, 'timm_fcnorm_noqkvbias');
    const model = loadTimm(folder, { imgSize: 24, antialias: false });
    expect(model.pos_embed.shape).toEqual([1, 37, 40]);
    const images = Tensor.from(new Float32Array(2 * 2 * 24 * 24).map((_, i) => Math.sin(i)), [2, 2, 24, 24]);
    const logits = model.forward(images);
    expect(logits.shape).toEqual([2, 5]);
    for (const t of [images, logits]) t.dispose();
    model.dispose();
  });
});

describe('the ViT variant options', () => {
  for (const variant of [
    { classToken: false, globalPool: 'avg' as const, initValues: 0.1, dropPath: 0.3, projBias: false },
    { noEmbedClass: true, globalPool: 'avg' as const, headDim: 24, dropout: 0.1, fcNorm: false },
  ])
    it(`free their intermediates: steps do not grow tensor memory, dispose() frees it (${Object.keys(variant).join(', ')})`, async () => {
      const external = () => process.memoryUsage().arrayBuffers;
      const start = external();
      const m = new ViTClassifier({ imgSize: [16, 12], patchSize: 4, inChannels: 1, numClasses: 4, dModel: 64, numHeads: 4, dFF: 128, depth: 2,
        ...variant });
      const opt = new AdamW(m.parameters());
      const x = Tensor.zeros([16, 1, 16, 12]), y = Tensor.zeros([16], 'int32');
      trainStep(m, opt, x, y);
      const oneStep = external() - start;
      for (let i = 0; i < 4; i++) trainStep(m, opt, x, y);
      for (let i = 0; i < 4; i++) await trainStepAsync(m, opt, x, y);
      const growth = external() - start - oneStep;
      m.dispose();
      opt.dispose();
      expect(growth).toBeLessThan(512 * 1024);
      expect(external() - start - (x.data.byteLength + y.data.byteLength)).toBeLessThan(512 * 1024);
      x.dispose();
      y.dispose();
    });
});

describe('resamplePosEmbed', () => {
  for (const file of fs.readdirSync(PRETRAINED).filter((n) => n.startsWith('resample_'))) {
    it(`${file}: matches timm's resample_abs_pos_embed`, () => {
      const io = readIo(file);
      const c = JSON.parse(io.metadata.config);
      const pos = io.input('posEmbed');
      const out = resamplePosEmbed(pos, { oldSize: c.oldSize, newSize: c.newSize, numPrefixTokens: c.numPrefixTokens, antialias: c.antialias });
      const ref = io.ref('output.posEmbed');
      expect(out.size).toBe(ref.length);
      const err = maxErr(out.data, ref);
      report.push(`  ${file.padEnd(32)} ${err.toExponential(2)}`);
      expect(err).toBeLessThan(2e-6);
      pos.dispose();
      out.dispose();
    });
  }

  it('checks its arguments', () => {
    const pos = Tensor.from(new Float32Array(10 * 2), [1, 10, 2]);
    expect(() => resamplePosEmbed(pos, { newSize: [2, 2], oldSize: [2, 2] })).toThrow(/options\.oldSize/);
    expect(() => resamplePosEmbed(pos, { newSize: [2, 2], numPrefixTokens: 1, antialias: 1 as never })).toThrow(/options\.antialias/);
    expect(() => resamplePosEmbed(pos, { newSize: [2, 2], newsize: 1 } as never)).toThrow(/did you mean 'newSize'/);
    pos.dispose();
  });
});
