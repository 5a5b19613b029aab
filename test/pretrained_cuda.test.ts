/**
 * The converted timm and transformers models on device 'cuda' (SIMT emulator) against themselves
 * on the CPU: the new paths (class-token layouts, average pool, LayerScale, wide heads, drop-in
 * biases, BERT's embeddings and pooler) run the same ops there.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';

import { loadTimm } from '../lib/convert/timm';
import { loadHfBert } from '../lib/convert/hf_bert';
import { BertModel } from '../lib/models/bert';
import { cuda } from '../lib/core/device';
import type { Module } from '../lib/core/module';
import { relErr } from './helpers';
import { emulatorSkipReason, useEmulator } from './support/cuda_emu_build';
import { PRETRAINED, readIo } from './support/pretrained';

const reason = emulatorSkipReason();
if (reason) console.log(`skipping the converted-models-on-cuda emulator tests: ${reason}`);

const grads = (m: Module) => m.namedParameters().map(([, p]) => p.grad!.toArray());

describe.skipIf(reason !== null)("converted models on device 'cuda' (SIMT emulator) match the CPU", () => {
  beforeAll(async () => {
    await useEmulator();
    expect(cuda().backendInfo().emulated).toBe(true);
  }, 900_000);

  for (const name of fs.readdirSync(PRETRAINED).filter((n) => n.startsWith('timm_')))
    it(`${name}: logits and gradients`, () => {
      const io = readIo(`${name}/io.safetensors`);
      const run = (device: 'cpu' | 'cuda') => {
        const model = loadTimm(path.join(PRETRAINED, name)).to(device);
        model.train();
        const images = io.input('images').to(device), dlogits = io.input('dlogits').to(device);
        const logits = model.forward(images), dimages = model.backward(dlogits);
        const out = { logits: logits.toArray(), dimages: dimages.toArray(), grads: grads(model) };
        for (const t of [images, dlogits, logits, dimages]) t.dispose();
        model.dispose();
        return out;
      };
      const cpu = run('cpu'), gpu = run('cuda');
      expect(relErr(gpu.logits, cpu.logits)).toBeLessThan(1e-4);
      expect(relErr(gpu.dimages, cpu.dimages)).toBeLessThan(1e-4);
      gpu.grads.forEach((g, i) => expect(relErr(g, cpu.grads[i])).toBeLessThan(1e-4));
    });

  it('BertModel (with its pooler): hidden state, pooler output and gradients', () => {
    const io = readIo('hf_bert/io.safetensors');
    const source = loadHfBert(path.join(PRETRAINED, 'hf_bert'));
    const run = (device: 'cpu' | 'cuda') => {
      const model = new BertModel(source.config);
      model.loadStateDict(Object.fromEntries(source.namedParameters()));
      model.to(device).eval({ keepActivations: true });
      const ids = io.input('inputIds').to(device), types = io.input('tokenTypeIds').to(device), mask = io.input('attentionMask').to(device);
      const dh = io.input('dLastHiddenState').to(device), dp = io.input('dPoolerOutput').to(device);
      const out = model.forward(ids, { tokenTypeIds: types, attentionMask: mask });
      model.backward(dh, dp);
      const r = { hidden: out.lastHiddenState.toArray(), pooled: out.poolerOutput!.toArray(), grads: grads(model) };
      for (const t of [ids, types, mask, dh, dp, out.lastHiddenState, out.poolerOutput!]) t.dispose();
      model.dispose();
      return r;
    };
    const cpu = run('cpu'), gpu = run('cuda');
    expect(relErr(gpu.hidden, cpu.hidden)).toBeLessThan(1e-4);
    expect(relErr(gpu.pooled, cpu.pooled)).toBeLessThan(1e-4);
    expect(gpu.grads.length).toBe(source.namedParameters().length);
    gpu.grads.forEach((g, i) => expect(relErr(g, cpu.grads[i])).toBeLessThan(1e-4));
    source.dispose();
  });
});
