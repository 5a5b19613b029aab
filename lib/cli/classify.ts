/**
 * Running a classifier from the command line: loading a checkpoint, batched predictions with loss
 * and accuracy, the check that a checkpoint is a 28×28 single-channel, 10-class ViTClassifier, and
 * `predict` on image files for both the digit demo's models and those trained on a folder.
 */
import * as fs from 'node:fs';

import type { Device, Precision } from '../core/device';
import { NodeformerError } from '../validation/errors';
import { crossEntropy } from '../training/losses';
import { ViTClassifier } from '../models/vit';
import { readSafetensorsMetadata } from '../io/safetensors';
import { readFolderMetadata } from './data_source';
import { digitBatch, readDigitImage, transformedBatch } from './images';
import { DIGIT_SIZE, type Digits, imageBatch, labelBatch } from './mnist';
import { UsageError } from './usage';

/** Predicted class (argmax) and its softmax probability for each row of logits [n, classes]. */
export function argmaxRows(logits: Float32Array, classes: number): { label: number; probability: number }[] {
  const out = [];
  for (let r = 0; r < logits.length / classes; r++) {
    const row = logits.subarray(r * classes, (r + 1) * classes);
    let best = 0;
    for (let c = 1; c < classes; c++) if (row[c] > row[best]) best = c;
    let sum = 0;
    for (let c = 0; c < classes; c++) sum += Math.exp(row[c] - row[best]);
    out.push({ label: best, probability: 1 / sum });
  }
  return out;
}

/** Mean loss, accuracy and every prediction of `model` (in eval mode, on its device) on `digits`. */
export function evaluate(model: ViTClassifier, digits: Digits, batchSize: number): { loss: number; accuracy: number; predicted: Int32Array } {
  const device = model.parameters()[0].device;
  const mode = model.training;
  model.eval();
  const predicted = new Int32Array(digits.count);
  let lossSum = 0, correct = 0;
  try {
    for (let start = 0; start < digits.count; start += batchSize) {
      const idx = Int32Array.from({ length: Math.min(batchSize, digits.count - start) }, (_, i) => start + i);
      const x = imageBatch(digits, idx).moveTo(device), y = labelBatch(digits, idx).moveTo(device);
      const logits = model.forward(x);
      const { loss, grad } = crossEntropy(logits, y);
      argmaxRows(logits.toArray(), model.numClasses).forEach((p, i) => {
        predicted[start + i] = p.label;
        if (p.label === digits.labels[start + i]) correct++;
      });
      lossSum += loss * idx.length;
      for (const t of [x, y, logits, grad]) t.dispose();
    }
  } finally {
    model.train(mode);
  }
  return { loss: lossSum / digits.count, accuracy: correct / digits.count, predicted };
}

/** Throws a UsageError unless `model` classifies 28×28 single-channel images into 10 digits. */
export function checkDigitClassifier(model: ViTClassifier, source: string): void {
  const c = model.config;
  if (c.imgSize !== DIGIT_SIZE || c.inChannels !== 1 || c.numClasses !== 10)
    throw new UsageError(`Expected a ViTClassifier of 28×28 single-channel images and 10 classes for ${source} but received ` +
      `imgSize ${c.imgSize}, inChannels ${c.inChannels}, numClasses ${c.numClasses}`);
}

/** Loads a ViTClassifier checkpoint; a missing file or one that does not load is a UsageError. */
export function loadClassifier(file: string): ViTClassifier {
  if (!fs.existsSync(file))
    throw new UsageError(`Cannot read the checkpoint ${file}: no such file (train one with \`nodeformer train\`, or pass --model)`);
  try {
    return ViTClassifier.load(file);
  } catch (e) {
    if (e instanceof NodeformerError) throw new UsageError(`Cannot load the checkpoint ${file}: ${e.message}`);
    throw e;
  }
}

/**
 * `nodeformer predict`: one line "<image>: <class> (<probability>%)" per image. A model trained on
 * a folder reads its images through the eval transform stored with it and names classes by
 * folder; the digit demo's model reads them as digits (readDigitImage).
 */
export async function predictImages(checkpoint: string, images: readonly string[], device: Device, precision: Precision = 'fp32'): Promise<string[]> {
  const model = loadClassifier(checkpoint);
  try {
    const folder = readFolderMetadata(readSafetensorsMetadata(checkpoint), checkpoint);
    if (!folder) checkDigitClassifier(model, checkpoint);
    const x = (folder ? await transformedBatch(images, folder.transform) : digitBatch(await Promise.all(images.map(readDigitImage)), DIGIT_SIZE)).moveTo(device);
    model.to(device).setPrecision(precision).eval();
    const logits = await model.forwardAsync(x);
    const lines = argmaxRows(logits.toArray(), model.numClasses)
      .map((p, i) => `${images[i]}: ${folder ? folder.classes[p.label] : p.label} (${(100 * p.probability).toFixed(1)}%)`);
    x.dispose();
    logits.dispose();
    return lines;
  } finally {
    model.dispose();
  }
}
