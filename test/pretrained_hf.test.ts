/**
 * Hugging Face transformers checkpoints (test/fixtures/pretrained/hf_*, save_pretrained folders
 * from transformers 5.18 by scripts/gen_pretrained_fixtures.py): ViTForImageClassification,
 * ViTModel (with its pooler) and BertModel load strictly and match transformers' float64 outputs
 * within 2e-5 and gradients within 2e-4.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { HF_BERT_RULES, loadHfBert } from '../lib/convert/hf_bert';
import { renameKeys } from '../lib/convert/hf_files';
import { HF_VIT_RULES, loadHfViTClassifier, loadHfViTModel } from '../lib/convert/hf_vit';
import type { Module } from '../lib/core/module';
import { Tensor } from '../lib/core/tensor';
import { maxErr, PRETRAINED, readIo, type PretrainedIo } from './support/pretrained';

const report: string[] = [];
afterAll(() => console.log(`transformers fixtures, largest error (max |Δ| / max(1, max |ref|)):\n${report.join('\n')}`));

/** Largest error of the parameter gradients the fixture holds (checkpoint names, renamed by `rules`; q/k/v rows of qkv). */
function paramGradErr(io: PretrainedIo, model: Module, rules: Parameters<typeof renameKeys>[1], prefix = ''): number {
  const params = new Map(model.namedParameters());
  let err = 0, n = 0;
  for (const key of Object.keys(io.entries).filter((k) => k.startsWith('grad.param.'))) {
    const ref = io.ref(key), probe = Tensor.from(new Float32Array(1), [1]);
    const ours = Object.keys(renameKeys({ [key.slice('grad.param.'.length)]: probe }, rules, 'fixture'))[0];
    probe.dispose();
    const m = /^(.*)\.(q|k|v)\.(weight|bias)$/.exec(ours);
    const name = m ? `${m[1]}.qkv.${m[3]}` : ours;
    if (!name.startsWith(prefix)) continue;
    const grad = params.get(name.slice(prefix.length))!.grad!.data;
    const part = m ? ['q', 'k', 'v'].indexOf(m[2]) : 0, size = ref.length;
    err = Math.max(err, maxErr(grad.subarray(part * size, (part + 1) * size), ref));
    n++;
  }
  expect(n).toBeGreaterThanOrEqual(3);
  return err;
}

describe('Hugging Face ViT', () => {
  it('ViTForImageClassification: logits and gradients', () => {
    const model = loadHfViTClassifier(path.join(PRETRAINED, 'hf_vit_classifier'));
    const io = readIo('hf_vit_classifier/io.safetensors');
    expect(model.config.eps).toBe(1e-12);
    const images = io.input('images'), dlogits = io.input('dlogits');
    model.train();
    const logits = model.forward(images);
    const dimages = model.backward(dlogits);
    const e = { logits: maxErr(logits.data, io.ref('output.logits')), images: maxErr(dimages.data, io.ref('grad.images')),
      params: paramGradErr(io, model, HF_VIT_RULES) };
    report.push(`  ViTForImageClassification  logits ${e.logits.toExponential(2)}  d(images) ${e.images.toExponential(2)}  d(params) ${e.params.toExponential(2)}`);
    expect(e.logits).toBeLessThan(2e-5);
    expect(e.images).toBeLessThan(2e-4);
    expect(e.params).toBeLessThan(2e-4);
    for (const t of [images, dlogits, logits, dimages]) t.dispose();
    model.dispose();
  });

  it('ViTModel: last hidden state, pooler output and gradients', () => {
    const { encoder, pooler } = loadHfViTModel(path.join(PRETRAINED, 'hf_vit_model'));
    expect(pooler).not.toBeNull();
    const io = readIo('hf_vit_model/io.safetensors');
    const images = io.input('images'), dh = io.input('dLastHiddenState');
    encoder.train();
    const hidden = encoder.forward(images);
    const pooled = pooler!.forward(hidden);
    const dimages = encoder.backward(dh);
    const e = { hidden: maxErr(hidden.data, io.ref('output.lastHiddenState')), pooled: maxErr(pooled.data, io.ref('output.poolerOutput')),
      images: maxErr(dimages.data, io.ref('grad.images')), params: paramGradErr(io, encoder, HF_VIT_RULES) };
    report.push(`  ViTModel                    hidden ${e.hidden.toExponential(2)}  pooler ${e.pooled.toExponential(2)}  ` +
      `d(images) ${e.images.toExponential(2)}  d(params) ${e.params.toExponential(2)}`);
    expect(e.hidden).toBeLessThan(2e-5);
    expect(e.pooled).toBeLessThan(2e-5);
    expect(e.images).toBeLessThan(2e-4);
    expect(e.params).toBeLessThan(2e-4);
    for (const t of [images, dh, hidden, pooled, dimages]) t.dispose();
    encoder.dispose();
    pooler!.dispose();
  });

  it('refuses a folder of another architecture and names unknown checkpoint keys', () => {
    expect(() => loadHfViTClassifier(path.join(PRETRAINED, 'hf_vit_model'))).toThrow(/ViTForImageClassification/);
    expect(() => renameKeys({ 'vit.encoder.layer.0.extra.weight': Tensor.zeros([1]) }, HF_VIT_RULES, 'a checkpoint'))
      .toThrow(/unexpected vit\.encoder\.layer\.0\.extra\.weight/);
    expect(() => loadHfViTModel(path.join(PRETRAINED, 'no_such_folder'))).toThrow(/save_pretrained folder/);
  });
});

describe('Hugging Face BertModel', () => {
  for (const name of fs.readdirSync(PRETRAINED).filter((n) => n.startsWith('hf_bert'))) {
    it(`${name}: last hidden state, pooler output and gradients with padding`, () => {
      const model = loadHfBert(path.join(PRETRAINED, name));
      const io = readIo(`${name}/io.safetensors`);
      const ids = io.input('inputIds'), types = io.input('tokenTypeIds'), mask = io.input('attentionMask');
      const dh = io.input('dLastHiddenState'), dp = io.input('dPoolerOutput');
      expect([model.config.dropout, model.config.attnDropout]).toEqual([0.1, 0.1]); // transformers' defaults, off in eval mode as there
      model.eval({ keepActivations: true });
      const out = model.forward(ids, { tokenTypeIds: types, attentionMask: mask });
      model.backward(dh, dp);
      const e = { hidden: maxErr(out.lastHiddenState.data, io.ref('output.lastHiddenState')),
        pooled: maxErr(out.poolerOutput!.data, io.ref('output.poolerOutput')), params: paramGradErr(io, model, HF_BERT_RULES) };
      report.push(`  ${name.padEnd(27)} hidden ${e.hidden.toExponential(2)}  pooler ${e.pooled.toExponential(2)}  d(params) ${e.params.toExponential(2)}`);
      expect(e.hidden).toBeLessThan(2e-5);
      expect(e.pooled).toBeLessThan(2e-5);
      expect(e.params).toBeLessThan(2e-4);
      for (const t of [ids, types, mask, dh, dp, out.lastHiddenState, out.poolerOutput!]) t.dispose();
      model.dispose();
    });
  }

  it('takes a bool attention mask like an int32 one, and checks its inputs', () => {
    const model = loadHfBert(path.join(PRETRAINED, 'hf_bert_deep'));
    const io = readIo('hf_bert_deep/io.safetensors');
    const ids = io.input('inputIds'), mask = io.input('attentionMask');
    const asBool = Tensor.from(Uint8Array.from(mask.data as Int32Array), mask.shape as [number, number]);
    model.eval();
    const a = model.forward(ids, { attentionMask: mask }), b = model.forward(ids, { attentionMask: asBool as never });
    expect(Array.from(b.lastHiddenState.data)).toEqual(Array.from(a.lastHiddenState.data));
    expect(() => model.forward(ids, { attentionmask: mask } as never)).toThrow(/did you mean 'attentionMask'/);
    expect(() => model.forward(ids, { tokenTypeIds: mask.reshape([mask.size]) })).toThrow(/inputs\.tokenTypeIds/);
    for (const t of [ids, mask, asBool, a.lastHiddenState, a.poolerOutput!, b.lastHiddenState, b.poolerOutput!]) t.dispose();
    model.dispose();
  });
});
