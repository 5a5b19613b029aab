/**
 * The loss-curve check (issue 22, item 6; issue 25's bf16 training): the seed-cifar model trained
 * `steps` steps at fp32 and at bf16 from the same start on the same batches, compared by the means
 * of windows of 20 steps (the bf16 curve within 2% of the fp32 one). Used by the GPU harness
 * (bench/gpu/harness.ts, on 'cuda') and by bench/loss_curve_run.ts (any device, with PyTorch's own
 * autocast curve on the same weights and batches beside ours: bench/gpu/torch_curve.py).
 *
 * The batches: each image is Gaussian noise plus a fixed pattern of its class (amplitude 0.5 against
 * noise 1; at 1 the fp32 curve of 300 steps falls from 2.3 to 0.16, at 0.1 it stays flat), labels
 * drawn at random. Every step sees fresh images, so the curve measures learning rather than
 * memorising a few batches (whose losses fall to ~0, where any relative comparison is noise); the
 * patterns are learnable, the noise keeps the loss away from 0. bench/gpu/torch_curve.py generates
 * the same batches (a counter-based generator, so numpy computes it at once); it checks batch 0's
 * fingerprint (batchFingerprint) before training.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

import {
  AdamW, saveModel, Tensor, trainStep, ViTClassifier, type Device, type Precision, type ViTClassifierConfig,
} from '../lib/index';
import type { ViTArch } from './specs';

export const CURVE_LIMIT = 0.02, CURVE_WINDOW = 20;

/** Batch k of B images [B, C, S, S] and labels (see the header). */
export function patternBatch(arch: ViTArch, B: number, k: number): { x: Float32Array; y: Int32Array } {
  let state = (0x9e3779b9 ^ Math.imul(k + 1, 0x85ebca6b)) >>> 0;
  const uniform = () => {  // mulberry32: call i mixes the counter k-seed + i · 0x6d2b79f5
    state = (state + 0x6d2b79f5) >>> 0;
    let t = Math.imul(state ^ (state >>> 15), state | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (((t ^ (t >>> 14)) >>> 0) + 0.5) / 4294967296;
  };
  const per = arch.inChannels * arch.imgSize ** 2;
  const y = Int32Array.from({ length: B }, () => Math.floor(uniform() * arch.numClasses));
  const x = Float32Array.from({ length: B * per }, (_, e) => {
    const pattern = Math.sin((y[Math.floor(e / per)] * per + (e % per)) * 12.9898) * 43758.5453 % 1;
    return Math.sqrt(-2 * Math.log(uniform())) * Math.cos(2 * Math.PI * uniform()) + 0.5 * pattern;
  });
  return { x, y };
}

/** What the Python twin checks of batch 0: its labels, and the sum and first values of its images. */
export function batchFingerprint(b: { x: Float32Array; y: Int32Array }): { labels: number[]; sum: number; first: number[] } {
  return { labels: Array.from(b.y), sum: b.x.reduce((s, v) => s + v, 0), first: Array.from(b.x.subarray(0, 8)) };
}

/** The ViTClassifier config of `arch` (seed 1, no dropout) at `precision` on `device`: the GPU harness's models and this check's. */
export function vitConfig(arch: ViTArch, precision: Precision, device: Device): ViTClassifierConfig {
  const { imgSize, patchSize, inChannels, numClasses, dModel, numHeads, dFF, depth } = arch;
  return { imgSize, patchSize, inChannels, numClasses, dModel, numHeads, dFF, depth, dropout: 0, seed: 1, device, precision };
}

/** A fresh ViTClassifier of vitConfig. */
export function curveModel(arch: ViTArch, precision: Precision, device: Device): ViTClassifier {
  return new ViTClassifier(vitConfig(arch, precision, device));
}

/** The losses of `batches.length` AdamW steps (lr 1e-3, PyTorch's defaults otherwise) of a fresh curveModel. */
export function trainCurve(arch: ViTArch, batches: { x: Float32Array; y: Int32Array }[], precision: Precision, device: Device): number[] {
  const model = curveModel(arch, precision, device), opt = new AdamW(model.parameters(), { lr: 1e-3 });
  const B = batches[0].y.length, shape = [B, arch.inChannels, arch.imgSize, arch.imgSize];
  try {
    return batches.map(({ x, y }) => {
      const images = Tensor.from(x, shape, device), labels = Tensor.from(y, [B], device);
      const loss = trainStep(model, opt, images, labels);
      images.dispose();
      labels.dispose();
      return loss;
    });
  } finally {
    model.dispose();
    opt.dispose();
  }
}

/** |mean(a) − mean(b)| / mean(b) over consecutive windows of `window` steps (the last partial one dropped). */
export function windowRelDiffs(a: number[], b: number[], window = CURVE_WINDOW): number[] {
  const w = Math.min(window, b.length), out: number[] = [];
  const mean = (v: number[], s: number) => v.slice(s, s + w).reduce((p, q) => p + q, 0) / w;
  for (let s = 0; s + w <= b.length; s += w) out.push(Math.abs(mean(a, s) - mean(b, s)) / mean(b, s));
  return out;
}

/**
 * What bench/gpu/torch_curve.py needs to train PyTorch's curve beside ours, into `dir`: the model's
 * starting weights (curve_init.safetensors, the same on every device) and curve.json (arch, batch
 * size, steps, batch 0's fingerprint, our curves).
 */
export function writeCurveFiles(dir: string, arch: ViTArch, batches: { x: Float32Array; y: Int32Array }[],
  ours: Record<string, number[]>): void {
  fs.mkdirSync(dir, { recursive: true });
  const model = curveModel(arch, 'fp32', 'cpu');
  saveModel(path.join(dir, 'curve_init.safetensors'), model);
  model.dispose();
  fs.writeFileSync(path.join(dir, 'curve.json'), JSON.stringify({ arch, batch: batches[0].y.length, steps: batches.length,
    window: CURVE_WINDOW, fingerprint: batchFingerprint(batches[0]), ours }));
}

/** Our curves and PyTorch's (either may be missing): each comparison's worst window and all of them. */
export function curveComparisons(ours: { fp32: number[]; bf16: number[] }, torch?: { fp32: number[]; bf16: number[] }):
  { what: string; worst: number; windows: number[] }[] {
  const pairs: [string, number[], number[]][] = [['ours bf16 vs ours fp32 (the check)', ours.bf16, ours.fp32]];
  if (torch)
    pairs.push(['PyTorch autocast bf16 vs PyTorch fp32', torch.bf16, torch.fp32], ['PyTorch fp32 vs ours fp32', torch.fp32, ours.fp32],
      ['PyTorch autocast bf16 vs ours bf16', torch.bf16, ours.bf16]);
  return pairs.map(([what, a, b]) => {
    const windows = windowRelDiffs(a, b);
    return { what, worst: Math.max(...windows), windows };
  });
}
