import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { describe, expect, it } from 'vitest';

import { loadModel, saveModel } from '../lib/persist';
import { saveSafetensors, readSafetensorsMetadata } from '../lib/safetensors';
import { LayerNorm } from '../lib/layers/layernorm';
import { ViTClassifier, ViTDecoder } from '../lib/models/vit';
import { Tensor } from '../lib/tensor';
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
      code: 'ERR_NF_FORMAT', message: expect.stringContaining('without "module" and "config" metadata') }));

    const other = tmpFile('ln.safetensors');
    saveModel(other, new LayerNorm({ dModel: 4 }));
    expect(() => ViTClassifier.load(other)).toThrow(expect.objectContaining({
      code: 'ERR_NF_FORMAT', message: expect.stringMatching(/Expected a ViTClassifier checkpoint .* but received a LayerNorm checkpoint/) }));

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
