/**
 * Precision 'bf16' on the CPU at the model level (the ops are held to the float64 reference in
 * test/ops_parity.test.ts): the products' inputs are rounded to bfloat16 with fp32 accumulation
 * (vdpbf16ps on avx512bf16, emulated with fp32 FMA on the other variants), so a model's numbers move
 * by about 2^-9 relative per product and are the same function of the inputs on every variant up to
 * the order of fp32 sums. Each with its own stated tolerance, the largest errors printed:
 * - a ViTClassifier forward and backward at bf16 against the same model at fp32, on every variant:
 *   logits, loss and every gradient within 3e-2 (the CUDA tolerance, test/precision.test.ts), and
 *   the variants against each other within 1e-5;
 * - training: 40 AdamW steps of a ViTClassifier at bf16 track the fp32 run's loss within 2% at every step;
 * - inference of the timm fixtures (test/fixtures/pretrained/timm_*, real checkpoints' shapes) at bf16
 *   against fp32: logits within 3e-2;
 * - the demo's MNIST ViT (lib/cli/train.ts DEMO_MODEL), trained briefly at fp32: test accuracy at
 *   bf16 within 1 point of fp32, predictions the same on ≥ 98% of the digits.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

import { afterAll, describe, expect, it } from 'vitest';

import { AdamW, crossEntropy, Tensor, trainStep, ViTClassifier, type Precision, type ViTClassifierConfig } from '../lib/index';
import { evaluate } from '../lib/cli/classify';
import { imageBatch, labelBatch, loadMnist } from '../lib/cli/mnist';
import { DEMO_MODEL } from '../lib/cli/train';
import { loadTimm } from '../lib/convert/timm';
import { Random } from '../lib/core/random';
import { PRETRAINED, readIo } from './support/pretrained';
import { isas, randn32, relErr, rng, withIsa } from './helpers';

const report: string[] = [];
afterAll(() => console.log(`bf16 on the CPU against fp32:\n${report.map((r) => `  ${r}`).join('\n')}`));

const VIT: ViTClassifierConfig = {
  imgSize: 12, patchSize: 4, inChannels: 3, dModel: 48, numHeads: 2, dFF: 72, depth: 2, dropout: 0, numClasses: 5, seed: 7,
};
const concat = (arrays: Float32Array[]) => Float32Array.from(arrays.flatMap((a) => [...a]));

/** One forward and backward (cross-entropy) of VIT at `precision`: loss, logits and every gradient. */
function step(precision: Precision) {
  const images = Tensor.from(Float32Array.from(randn32(3 * 3 * 12 * 12, rng(11))), [3, 3, 12, 12]);
  const targets = Tensor.from(Int32Array.from([1, 4, 0]), [3]);
  const model = new ViTClassifier({ ...VIT, precision });
  const logits = model.forward(images);
  const { loss, grad } = crossEntropy(logits, targets);
  model.backward(grad);
  const grads = model.namedParameters().map(([n, p]) => [n, p.grad!.toArray()] as const);
  const out = { loss, logits: logits.toArray(), grads };
  model.dispose();
  return out;
}

describe('a ViTClassifier forward and backward at bf16 against fp32', () => {
  const results = new Map(isas.map((isa) => [isa, withIsa(isa, () => ({ fp32: step('fp32'), bf16: step('bf16') }))]));

  it.each(isas)('%s: logits, loss and every gradient within 3e-2', (isa) => {
    const { fp32, bf16 } = results.get(isa)!;
    const errors: Record<string, number> = { logits: relErr(bf16.logits, fp32.logits), loss: relErr([bf16.loss], [fp32.loss]) };
    for (const [i, [name, g]] of bf16.grads.entries()) errors[`grad ${name}`] = relErr(g, fp32.grads[i][1]);
    errors['all gradients'] = relErr(concat(bf16.grads.map(([, g]) => g)), concat(fp32.grads.map(([, g]) => g)));
    const [worst, e] = Object.entries(errors).filter(([k]) => k.startsWith('grad ')).reduce((a, b) => (b[1] > a[1] ? b : a));
    report.push(`ViT step (${isa}): logits ${errors.logits.toExponential(2)}, loss ${errors.loss.toExponential(2)}, all gradients ` +
      `${errors['all gradients'].toExponential(2)}, largest gradient ${e.toExponential(2)} (${worst}); tolerance 3e-2`);
    for (const [name, err] of Object.entries(errors)) expect(err, name).toBeLessThan(3e-2);
    expect(errors.logits, 'the rounding shows').toBeGreaterThan(1e-5);
  });

  it('every variant computes the same function (vdpbf16ps and the emulation differ by the order of sums only)', () => {
    const base = results.get('scalar')!.bf16;
    for (const isa of isas) {
      const { bf16 } = results.get(isa)!;
      const e = Math.max(relErr(bf16.logits, base.logits), relErr(concat(bf16.grads.map(([, g]) => g)), concat(base.grads.map(([, g]) => g))));
      report.push(`ViT step at bf16, ${isa} against scalar: ${e.toExponential(2)} (tolerance 1e-5)`);
      expect(e, isa).toBeLessThan(1e-5);
    }
  });
});

describe('training at bf16', () => {
  it('40 AdamW steps of a ViTClassifier track the fp32 loss within 2% at every step', () => {
    // A learnable task, kept hard enough that the loss stays well above 0 over the 40 steps (where a
    // relative difference of 2% means something): the class is the quadrant of a faint square on noise.
    const B = 16, steps = 40, r = new Random(3);
    const batches = Array.from({ length: steps }, () => {
      const x = Float32Array.from(randn32(B * 3 * 12 * 12, () => r.uniform()));
      const y = Int32Array.from({ length: B }, () => Math.floor(r.uniform() * 4));
      y.forEach((c, b) => {
        for (let ch = 0; ch < 3; ch++)
          for (let i = 0; i < 6; i++)
            for (let j = 0; j < 6; j++) x[((b * 3 + ch) * 12 + (c >> 1) * 6 + i) * 12 + (c & 1) * 6 + j] += 0.8;
      });
      return { x, y };
    });
    const run = (precision: Precision) => {
      const model = new ViTClassifier({ ...VIT, numClasses: 4, precision });
      const opt = new AdamW(model.parameters(), { lr: 2e-3, weightDecay: 0.05 });
      const losses = batches.map(({ x, y }) => {
        const images = Tensor.from(x, [B, 3, 12, 12]), targets = Tensor.from(y, [B]);
        const loss = trainStep(model, opt, images, targets);
        images.dispose();
        targets.dispose();
        return loss;
      });
      opt.dispose();
      model.dispose();
      return losses;
    };
    const fp32 = run('fp32'), bf16 = run('bf16');
    const diffs = fp32.map((l, i) => Math.abs(bf16[i] - l) / l);
    const worst = Math.max(...diffs);
    report.push(`training, ${steps} steps (${isas.at(-1)}): loss ${fp32[0].toFixed(4)} → ${fp32.at(-1)!.toFixed(4)} at fp32, ` +
      `${bf16[0].toFixed(4)} → ${bf16.at(-1)!.toFixed(4)} at bf16; largest step difference ${(100 * worst).toFixed(2)}% (step ${diffs.indexOf(worst) + 1}); tolerance 2%`);
    expect(fp32.slice(-5).reduce((a, b) => a + b) / 5).toBeLessThan(0.8 * fp32[0]); // it learns
    expect(worst).toBeLessThan(0.02);
  }, 300_000);
});

describe('inference at bf16 against fp32', () => {
  const timm = fs.readdirSync(PRETRAINED).filter((n) => n.startsWith('timm_'));

  it.each(timm)('%s: logits within 3e-2', (name) => {
    const model = loadTimm(path.join(PRETRAINED, name));
    model.eval();
    const images = readIo(`${name}/io.safetensors`).input('images');
    const logits = (precision: Precision) => {
      model.setPrecision(precision);
      const out = model.forward(images);
      const values = out.toArray();
      out.dispose();
      return values;
    };
    const fp32 = logits('fp32'), bf16 = logits('bf16');
    const e = relErr(bf16, fp32);
    report.push(`${name}: logits ${e.toExponential(2)} (tolerance 3e-2)`);
    expect(e).toBeLessThan(3e-2);
    images.dispose();
    model.dispose();
  });

  it("the demo's MNIST ViT, trained briefly at fp32: test accuracy at bf16 within 1 point, ≥ 98% of predictions the same", () => {
    const { train, test } = loadMnist({ trainSize: 4000, testSize: 1000 });
    const model = new ViTClassifier({ ...DEMO_MODEL, seed: 0 });
    const opt = new AdamW(model.parameters(), { lr: 3e-3 });
    const r = new Random(0);
    for (let epoch = 0; epoch < 3; epoch++)
      for (let start = 0; start < train.count; start += 32) {
        const idx = Int32Array.from({ length: 32 }, () => Math.floor(r.uniform() * train.count));
        const x = imageBatch(train, idx), y = labelBatch(train, idx);
        trainStep(model, opt, x, y);
        x.dispose();
        y.dispose();
      }
    const fp32 = evaluate(model.setPrecision('fp32'), test, 100), bf16 = evaluate(model.setPrecision('bf16'), test, 100);
    const same = fp32.predicted.filter((p, i) => p === bf16.predicted[i]).length / test.count;
    report.push(`demo MNIST ViT (${test.count} test digits): accuracy ${(100 * fp32.accuracy).toFixed(1)}% at fp32, ` +
      `${(100 * bf16.accuracy).toFixed(1)}% at bf16; ${(100 * same).toFixed(1)}% of predictions the same; loss ${fp32.loss.toFixed(4)} / ${bf16.loss.toFixed(4)}`);
    expect(fp32.accuracy).toBeGreaterThan(0.7); // it learned (the demo's 12 epochs of 8000 digits reach ~97%)
    expect(Math.abs(bf16.accuracy - fp32.accuracy)).toBeLessThanOrEqual(0.01);
    expect(same).toBeGreaterThanOrEqual(0.98);
    opt.dispose();
    model.dispose();
  }, 300_000);
});
