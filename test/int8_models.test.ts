/**
 * Precision 'int8' on two models with real weights, next to onnxruntime's own int8 on the same weights
 * (quantize_dynamic(weight_type=QInt8): test/fixtures/int8/ort_int8.json, made by
 * scripts/int8_ort_fixtures.py, which states how), on every ISA variant this machine runs:
 *   - the MNIST demo's ViT (test/fixtures/int8/mnist_vit.safetensors, `nodeformer train` with its
 *     defaults: 97.60% on the demo's 2000 test digits) at int8: its test accuracy, how many predictions
 *     int8 changes, and ‖logits_int8 − logits_fp32‖ / ‖logits_fp32‖;
 *   - the two PP-OCRv4 transformer blocks (test/fixtures/ppocr) at int8: ‖out − f64‖ / ‖f64‖ against
 *     the fixture's float64 recomputation.
 * Ours must be no worse than onnxruntime int8: accuracy at least its, output differences at most its.
 * (Ours quantizes activations per row and weights per output channel; onnxruntime's quantize_dynamic
 * per tensor for both.)
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

import { afterAll, describe, expect, it } from 'vitest';

import { evaluate } from '../lib/cli/classify';
import { imageBatch, loadMnist } from '../lib/cli/mnist';
import { Tensor } from '../lib/core/tensor';
import { parseSafetensors } from '../lib/io/safetensors';
import { loadModel } from '../lib/io/persist';
import { EncoderBlock } from '../lib/layers/blocks';
import { ViTClassifier } from '../lib/models/vit';
import { isas, relErr, withIsa } from './helpers';

const FIXTURES = path.join(__dirname, 'fixtures');
const ort = JSON.parse(fs.readFileSync(path.join(FIXTURES, 'int8', 'ort_int8.json'), 'utf8')) as {
  onnxruntime: string;
  mnist: { count: number; fp32Accuracy: number; int8Accuracy: number; int8LogitsRelDiff: number; int8ChangedPredictions: number };
  ppocr: { fp32RelErr: number; int8RelErr: number };
};
const lines: string[] = [];
afterAll(() => console.log([`int8 next to onnxruntime ${ort.onnxruntime} int8 (quantize_dynamic, QInt8) on the same weights:`, ...lines].join('\n  ')));

describe('the MNIST demo ViT at int8', () => {
  const model = loadModel(path.join(FIXTURES, 'int8', 'mnist_vit.safetensors'), ViTClassifier).eval();
  const { test } = loadMnist();
  const all = Int32Array.from({ length: test.count }, (_, i) => i);
  const logits = () => {
    const x = imageBatch(test, all), y = model.forward(x), out = y.toArray();
    x.dispose();
    y.dispose();
    return out;
  };
  const fp32 = { ...evaluate(model.setPrecision('fp32'), test, 250), logits: logits() };
  afterAll(() => model.dispose());

  it('is the fixture: 2000 test digits, fp32 accuracy as onnxruntime fp32 measured it', () => {
    expect(test.count).toBe(ort.mnist.count);
    expect(fp32.accuracy).toBe(ort.mnist.fp32Accuracy);
  });

  it.each(isas)('%s: accuracy at least onnxruntime int8\'s, logits as close to fp32 as its or closer', (isa) => {
    const q = withIsa(isa, () => {
      model.setPrecision('int8');
      try {
        return { ...evaluate(model, test, 250), logits: logits() };
      } finally {
        model.setPrecision('fp32');
      }
    });
    const diff = relErr(q.logits, fp32.logits);
    const changed = q.predicted.filter((p, i) => p !== fp32.predicted[i]).length;
    lines.push(`MNIST ViT (${isa}): accuracy ${(100 * q.accuracy).toFixed(2)}% (fp32 ${(100 * fp32.accuracy).toFixed(2)}%), ` +
      `${changed} predictions changed, logits ${diff.toExponential(2)} from fp32 — onnxruntime int8: ` +
      `${(100 * ort.mnist.int8Accuracy).toFixed(2)}%, ${ort.mnist.int8ChangedPredictions} changed, ${ort.mnist.int8LogitsRelDiff.toExponential(2)}`);
    expect(q.accuracy).toBeGreaterThanOrEqual(ort.mnist.int8Accuracy);
    expect(changed).toBeLessThanOrEqual(Math.max(ort.mnist.int8ChangedPredictions, 2));
    expect(diff).toBeLessThanOrEqual(ort.mnist.int8LogitsRelDiff);
    expect(diff).toBeGreaterThan(1e-4); // it is quantized
  });
});

describe('the PP-OCRv4 blocks at int8', () => {
  const read = (file: string) => parseSafetensors(fs.readFileSync(path.join(FIXTURES, 'ppocr', file))).entries;
  const weights = read('blocks.safetensors'), io = read('io.safetensors');
  const config = { dModel: 120, numHeads: 8, dFF: 240, activation: 'silu', normFirst: true, eps: 1e-5 } as const;
  const blocks = [0, 1].map((i) => {
    const b = new EncoderBlock(config);
    const prefix = `blocks.${i}.`;
    const state = Object.fromEntries(Object.entries(weights).filter(([k]) => k.startsWith(prefix))
      .map(([k, e]) => [k.slice(prefix.length), Tensor.from(Float32Array.from(e.data as Float32Array), e.shape as number[])]));
    b.loadStateDict(state, { strict: true });
    for (const t of Object.values(state)) t.dispose();
    return b.eval();
  });
  const run = () => {
    const x = Tensor.from(Float32Array.from(io['input.x'].data as Float32Array), io['input.x'].shape as number[]);
    const y0 = blocks[0].forward(x), y1 = blocks[1].forward(y0), out = y1.toArray();
    for (const t of [x, y0, y1]) t.dispose();
    return out;
  };
  const ref = io['f64.block1'].data as Float32Array;
  afterAll(() => blocks.forEach((b) => b.dispose()));

  it.each(isas)('%s: the second block\'s output as close to float64 as onnxruntime int8\'s, or closer', (isa) => {
    const e32 = relErr(withIsa(isa, run), ref);
    const e8 = withIsa(isa, () => {
      blocks.forEach((b) => b.setPrecision('int8'));
      try {
        return relErr(run(), ref);
      } finally {
        blocks.forEach((b) => b.setPrecision('fp32'));
      }
    });
    lines.push(`PP-OCRv4 blocks (${isa}): int8 ${e8.toExponential(2)} from float64 (fp32 ${e32.toExponential(2)}) — onnxruntime int8 ` +
      `${ort.ppocr.int8RelErr.toExponential(2)} (fp32 ${ort.ppocr.fp32RelErr.toExponential(2)})`);
    expect(e32).toBeLessThan(1e-5);
    expect(e8).toBeLessThanOrEqual(ort.ppocr.int8RelErr);
    expect(e8).toBeGreaterThan(1e-4);
  });
});
