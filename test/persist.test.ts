import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { describe, expect, it } from 'vitest';

import type { FitContext } from '../lib/training/callbacks';
import { resume, saveCheckpoint } from '../lib/training/checkpoint';
import { bestModel } from '../lib/cli/best_model';
import { fit } from '../lib/training/fit';
import { AdamW, cosineWithWarmup, modelCheckpoint } from '../lib/index';
import { loadModel, saveModel } from '../lib/io/persist';
import { entriesToTensors, loadSafetensors, readSafetensors, readSafetensorsMetadata, saveSafetensors } from '../lib/io/safetensors';
import { LayerNorm } from '../lib/layers/layernorm';
import { ViTClassifier, ViTDecoder } from '../lib/models/vit';
import { Tensor } from '../lib/core/tensor';
import { rng } from './helpers';

const config = { imgSize: 8, patchSize: 4, inChannels: 1, numClasses: 3, dModel: 16, numHeads: 2, dFF: 32, depth: 2, seed: 5 };

function tmpFile(name: string): string {
  return path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'nf-persist-')), name);
}

function images(): Tensor<'float32'> {
  const r = rng(1);
  return Tensor.from(Float32Array.from({ length: 2 * 64 }, () => r() * 2 - 1), [2, 1, 8, 8]);
}

describe('saveModel / ViTClassifier.load', () => {
  it('round-trips a trained-looking classifier: same config, same weights, identical outputs', () => {
    const model = new ViTClassifier(config);
    for (const p of model.parameters()) p.data.forEach((v, i, a) => (a[i] = v + 0.01 * Math.sin(i)));
    const file = tmpFile('m.safetensors');
    saveModel(file, model);
    expect(readSafetensorsMetadata(file)).toEqual({ module: 'ViTClassifier', config: JSON.stringify(model.config) });
    expect(JSON.parse(readSafetensorsMetadata(file).config)).toMatchObject({ numClasses: 3, dModel: 16, depth: 2 });

    const back = ViTClassifier.load(file);
    expect(back).toBeInstanceOf(ViTClassifier);
    expect(back.config).toEqual(model.config);
    const x = images();
    model.eval();
    back.eval();
    expect(Array.from(back.forward(x).toArray())).toEqual(Array.from(model.forward(x).toArray()));
  });

  it('restores any configured module through loadModel', () => {
    const dec = new ViTDecoder({ imgSize: 8, patchSize: 4, inChannels: 1, dModel: 16, numHeads: 2, dFF: 32, depth: 1, seed: 2 });
    const file = tmpFile('d.safetensors');
    saveModel(file, dec);
    const back = loadModel(file, ViTDecoder);
    for (const [name, p] of back.namedParameters()) expect(Array.from(p.toArray())).toEqual(Array.from(dec.stateDict()[name].toArray()));
  });

  it('rejects a file without the metadata, of another module, or with a bad config with ERR_NF_FORMAT', () => {
    const model = new ViTClassifier(config);
    const plain = tmpFile('plain.safetensors');
    saveSafetensors(plain, model.stateDict());
    expect(() => ViTClassifier.load(plain)).toThrow(expect.objectContaining({
      code: 'ERR_NF_FORMAT', message: expect.stringContaining('without "module" and "config" metadata (a bare state dict)') }));

    const other = tmpFile('ln.safetensors');
    saveModel(other, new LayerNorm({ dModel: 4 }));
    expect(() => ViTClassifier.load(other)).toThrow(expect.objectContaining({
      code: 'ERR_NF_FORMAT', message: expect.stringMatching(/Expected a ViTClassifier model file .* but received a LayerNorm model file \(loadModel\(path\) restores it/) }));
    expect(loadModel(other)).toBeInstanceOf(LayerNorm);

    const bad = tmpFile('bad.safetensors');
    saveSafetensors(bad, model.stateDict(), { module: 'ViTClassifier', config: '{"patchSize": 3}' });
    expect(() => ViTClassifier.load(bad)).toThrow(expect.objectContaining({ code: 'ERR_NF_FORMAT', message: expect.stringContaining('config.patchSize') }));
    saveSafetensors(bad, model.stateDict(), { module: 'ViTClassifier', config: 'not json' });
    expect(() => ViTClassifier.load(bad)).toThrow(expect.objectContaining({ code: 'ERR_NF_FORMAT' }));
  });

  it('rejects weights that do not fit the stored config (strict state dict)', () => {
    const model = new ViTClassifier(config);
    const file = tmpFile('m.safetensors');
    saveSafetensors(file, model.stateDict(), { module: 'ViTClassifier', config: JSON.stringify({ ...model.config, depth: 3 }) });
    expect(() => ViTClassifier.load(file)).toThrow(expect.objectContaining({ code: 'ERR_NF_STATE_DICT', message: expect.stringContaining('blocks.2') }));
    expect(() => ViTClassifier.load(tmpFile('missing.safetensors'))).toThrow(expect.objectContaining({ code: 'ERR_NF_INVALID_ARG' }));
  });
});

/** Identical outputs in eval mode: the restored model is the saved one. */
function expectSameModel(back: ViTClassifier, model: ViTClassifier, sameConfig = true): void {
  expect(back).toBeInstanceOf(ViTClassifier);
  if (sameConfig) expect(back.config).toEqual(model.config);
  const x = images();
  model.eval();
  back.eval();
  expect(Array.from(back.forward(x).toArray())).toEqual(Array.from(model.forward(x).toArray()));
  model.train();
}

/** A classifier whose weights are not its initial ones (so a load that silently re-initialises fails). */
function trained(): ViTClassifier {
  const model = new ViTClassifier(config);
  for (const p of model.parameters()) p.data.forEach((v, i, a) => (a[i] = v + 0.01 * Math.cos(i)));
  return model;
}

describe('every file written for a model loads through loadModel(path) and Class.load(path)', () => {
  it('saveModel and saveCheckpoint (weights, optimizer state, schedule): both loaders, and resume still restores the checkpoint', () => {
    const model = trained();
    const modelFile = tmpFile('model.safetensors'), ckptFile = tmpFile('ckpt.safetensors');
    saveModel(modelFile, model);
    const opt = new AdamW(model.parameters(), { lr: 1e-3 });
    saveCheckpoint(ckptFile, { model, optimizer: opt, schedule: cosineWithWarmup({ lr: 1e-3, warmupSteps: 2, totalSteps: 10 }), step: 7 });
    for (const file of [modelFile, ckptFile]) {
      expectSameModel(ViTClassifier.load(file), model);
      expectSameModel(loadModel(file) as ViTClassifier, model);
      expectSameModel(loadModel(file, ViTClassifier), model);
    }
    const other = new ViTClassifier({ ...config, seed: 9 });
    expect(resume(ckptFile, { model: other, optimizer: new AdamW(other.parameters()) }).step).toBe(7);
    expectSameModel(other, model, false); // built with another seed
    expect(() => LayerNorm.load(ckptFile)).toThrow(expect.objectContaining({ code: 'ERR_NF_FORMAT',
      message: expect.stringContaining('a ViTClassifier model file (loadModel(path) restores it') }));
  });

  it("fit()'s modelCheckpoint, as the README's fit() snippet writes it", async () => {
    const model = trained(), file = tmpFile('best.safetensors');
    const r = rng(4);
    const batch = () => ({ input: Tensor.from(Float32Array.from({ length: 4 * 64 }, () => r() - 0.5), [4, 1, 8, 8]),
      target: Tensor.from(Int32Array.from({ length: 4 }, (_, i) => i % 3), [4]) });
    await fit(model, new AdamW(model.parameters()), [batch(), batch()], {
      epochs: 2, validation: [batch()], callbacks: [modelCheckpoint(file, { monitor: 'valAccuracy', saveBestOnly: false })] });
    expectSameModel(ViTClassifier.load(file), model);
    expectSameModel(loadModel(file) as ViTClassifier, model);
  });

  it("the command line's best epoch (model.safetensors with its class names)", async () => {
    const model = trained(), file = tmpFile('model.safetensors');
    const cb = bestModel(file, model, { classes: '["a","b","c"]' });
    await cb.onTrainBegin!({ hasValidation: false } as FitContext);
    await cb.onEpochEnd!({ epoch: 1, step: 1, loss: 1, lr: 1e-3, samples: 1, seconds: 1, samplesPerSecond: 1 }, {} as FitContext);
    expectSameModel(ViTClassifier.load(file), model);
    expectSameModel(loadModel(file) as ViTClassifier, model);
  });

  it('a file without the metadata names a call that restores it, and that call works', () => {
    const model = trained();
    // A training checkpoint of an earlier release: no "module"/"config" metadata.
    const old = tmpFile('old.safetensors'), current = tmpFile('current.safetensors');
    saveCheckpoint(current, { model, step: 3 });
    const { entries, metadata } = readSafetensors(current);
    const { module: _m, config: _c, ...oldMetadata } = metadata;
    saveSafetensors(old, entriesToTensors(entries), oldMetadata);
    for (const load of [() => loadModel(old), () => ViTClassifier.load(old)])
      expect(load).toThrow(expect.objectContaining({ code: 'ERR_NF_FORMAT', message: expect.stringContaining('resume(path, { model })') }));
    const fresh = new ViTClassifier({ ...config, seed: 8 });
    resume(old, { model: fresh });
    expectSameModel(fresh, model, false); // built with another seed

    // A bare state dict.
    const plain = tmpFile('plain.safetensors');
    saveSafetensors(plain, model.stateDict());
    for (const load of [() => loadModel(plain), () => ViTClassifier.load(plain)])
      expect(load).toThrow(expect.objectContaining({ code: 'ERR_NF_FORMAT', message: expect.stringContaining('model.loadStateDict(loadSafetensors(path))') }));
    const built = new ViTClassifier({ ...config, seed: 8 });
    built.loadStateDict(loadSafetensors(plain));
    expectSameModel(built, model, false); // built with another seed
  });
});
