/**
 * `nodeformer train --data <folder>`: trains a ViTClassifier on an image folder (lib/cli/data_source)
 * with AdamW and a cosine schedule with warmup, one trainStepAsync per batch while the DataLoader's
 * workers decode the next ones, evaluates on the validation part after each epoch, and writes the
 * checkpoint with its class names and eval transform, which `nodeformer predict` reads.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

import type { DataLoader } from '../data/loader';
import type { Device } from '../device';
import { crossEntropy } from '../losses';
import { ViTClassifier, type ViTClassifierConfig } from '../models/vit';
import { AdamW } from '../optim';
import { saveModel } from '../persist';
import { cosineWithWarmup } from '../schedule';
import { trainStepAsync } from '../train';
import { argmaxRows, onDevice } from './classify';
import { folderMetadata, folderSource } from './data_source';
import { UsageError } from './usage';

/** Options of a folder run (the command line's flags). */
export interface FolderTrainOptions {
  data: string;
  imageSize: number;
  valSplit: number;
  epochs: number;
  batchSize: number;
  lr: number;
  seed: number;
  /** Decoding worker threads (default: DataLoader's). */
  workers?: number;
  out: string;
  device?: Device;
  log: (line: string) => void;
}

/** The model for a folder: 8×8 patches, width 64, 4 pre-LN blocks, 3 channels. */
export const FOLDER_MODEL: Omit<ViTClassifierConfig, 'imgSize' | 'numClasses'> = {
  patchSize: 8, inChannels: 3, dModel: 64, numHeads: 4, dFF: 128, depth: 4,
};
const WARMUP_FRACTION = 0.05;
const WEIGHT_DECAY = 0.05;

/** Mean loss and accuracy of `model` (eval mode) over `loader`. */
async function validate(model: ViTClassifier, loader: DataLoader, device: Device): Promise<{ loss: number; accuracy: number }> {
  model.eval();
  let lossSum = 0, correct = 0, seen = 0;
  for await (const { input, target } of loader) {
    const x = onDevice(input, device), y = target.to(device);
    const logits = await model.forwardAsync(x);
    const { loss, grad } = crossEntropy(logits, y);
    argmaxRows(logits.toArray(), model.numClasses).forEach((p, i) => (correct += Number(p.label === target.data[i])));
    lossSum += loss * target.size;
    seen += target.size;
    for (const t of [x, y, target, logits, grad]) t.dispose();
  }
  model.train();
  return { loss: lossSum / seen, accuracy: correct / seen };
}

/** Trains on the folder and writes <out>/model.safetensors; returns the last validation accuracy (NaN without validation). */
export async function trainFolder(o: FolderTrainOptions): Promise<{ validationAccuracy: number; file: string }> {
  if (o.imageSize % FOLDER_MODEL.patchSize! !== 0)
    throw new UsageError(`Expected --image-size to be a multiple of the patch size ${FOLDER_MODEL.patchSize} but received ${o.imageSize}`);
  const device = o.device ?? 'cpu';
  const src = folderSource(o);
  const model = new ViTClassifier({ ...FOLDER_MODEL, imgSize: o.imageSize, numClasses: src.classes.length, seed: o.seed }).to(device);
  const opt = new AdamW(model.parameters(), { lr: o.lr, weightDecay: WEIGHT_DECAY });
  const totalSteps = o.epochs * src.train.length;
  const lr = cosineWithWarmup({ lr: o.lr, warmupSteps: Math.round(WARMUP_FRACTION * totalSteps), totalSteps });
  const nTrain = src.train.dataset.length, nVal = src.validation?.dataset.length ?? 0;
  o.log(`Training a ViT (${model.parameters().reduce((n, p) => n + p.size, 0).toLocaleString('en-US')} parameters, ${o.imageSize}×${o.imageSize} ` +
    `images) on ${nTrain} images of ${src.classes.length} classes (${src.classes.join(', ')}) from ${o.data}, validating on ${nVal}; ` +
    `${src.train.workers} decoding worker${src.train.workers > 1 ? 's' : ''}`);
  let step = 0, validationAccuracy = NaN;
  for (let epoch = 1; epoch <= o.epochs; epoch++) {
    const t0 = performance.now();
    let lossSum = 0;
    src.train.setEpoch(epoch - 1);
    for await (const { input, target } of src.train) {
      const x = onDevice(input, device), y = target.to(device);
      opt.options.lr = lr(++step);
      lossSum += (await trainStepAsync(model, opt, x, y)) * target.size;
      for (const t of [x, y, target]) t.dispose();
    }
    const seconds = (performance.now() - t0) / 1000;
    let line = `epoch ${epoch}/${o.epochs}  train loss ${(lossSum / nTrain).toFixed(4)}`;
    if (src.validation) {
      const v = await validate(model, src.validation, device);
      validationAccuracy = v.accuracy;
      line += `  |  validation loss ${v.loss.toFixed(4)} acc ${(100 * v.accuracy).toFixed(2)}%`;
    }
    o.log(`${line}  |  ${(nTrain / seconds).toFixed(0)} img/s`);
  }
  fs.mkdirSync(o.out, { recursive: true });
  const file = path.join(o.out, 'model.safetensors');
  model.to('cpu');
  saveModel(file, model, folderMetadata(src.classes, src.transform));
  model.dispose();
  opt.dispose();
  o.log(`Wrote ${file} (classes ${src.classes.join(', ')}); try it with \`nodeformer predict <image...> --model ${file}\``);
  return { validationAccuracy, file };
}
