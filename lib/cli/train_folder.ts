/**
 * `nodeformer train --data <folder>`: trains a ViTClassifier on an image folder (lib/cli/data_source:
 * a seeded training/validation split, decoded on the DataLoader's worker threads) on the command
 * line's one training path (lib/cli/training), and keeps the best epoch in model.safetensors with
 * its class names and eval transform, which `nodeformer predict` reads.
 */
import { ViTClassifier, type ViTClassifierConfig } from '../models/vit';
import { folderMetadata, folderSource } from './data_source';
import { deviceBatches } from './device_batches';
import { percent, runTraining, type RunOptions } from './training';
import { UsageError } from './usage';

/** Options of a folder run (the command line's flags). */
export interface FolderTrainOptions extends RunOptions {
  data: string;
  imageSize: number;
  valSplit: number;
  /** Decoding worker threads (default: DataLoader's). */
  workers?: number;
}

/** The model for a folder: 8×8 patches, width 64, 4 pre-LN blocks, 3 channels. */
export const FOLDER_MODEL: Omit<ViTClassifierConfig, 'imgSize' | 'numClasses'> = {
  patchSize: 8, inChannels: 3, dModel: 64, numHeads: 4, dFF: 128, depth: 4,
};

/** Trains on the folder and writes <out>/model.safetensors; returns the kept epoch's validation accuracy (NaN without validation). */
export async function trainFolder(o: FolderTrainOptions): Promise<{ validationAccuracy: number; file: string }> {
  if (o.imageSize % FOLDER_MODEL.patchSize! !== 0)
    throw new UsageError(`Expected --image-size to be a multiple of the patch size ${FOLDER_MODEL.patchSize} but received ${o.imageSize}`);
  const device = o.device ?? 'cpu';
  const src = folderSource(o);
  const model = new ViTClassifier({ ...FOLDER_MODEL, imgSize: o.imageSize, numClasses: src.classes.length, seed: o.seed }).to(device);
  const nVal = src.validation?.dataset.length ?? 0, workers = src.train.workers;
  const run = await runTraining(model, {
    train: deviceBatches(src.train, device),
    ...(src.validation ? { validation: deviceBatches(src.validation, device) } : {}),
    description: `${src.train.dataset.length} images of ${src.classes.length} classes (${src.classes.join(', ')}) from ${o.data}, ` +
      `validating on ${nVal}; ${workers} decoding worker${workers > 1 ? 's' : ''}`,
    validationName: 'validation',
  }, o, {
    metadata: folderMetadata(src.classes, src.transform),
    hparams: { lr: o.lr, batchSize: o.batchSize, epochs: o.epochs, seed: o.seed, imageSize: o.imageSize, valSplit: o.valSplit },
  });
  model.dispose();
  const kept = run.history[run.bestEpoch - 1];
  o.log(`Wrote ${run.file}: the model of epoch ${run.bestEpoch} (the lowest ${nVal ? 'validation' : 'training'} loss` +
    (nVal ? `, validation accuracy ${percent(kept.valAccuracy)}` : '') + `), classes ${src.classes.join(', ')}` +
    (o.logdir ? `; TensorBoard logs in ${o.logdir}` : '') + `. Try it: nodeformer predict <image...> --model ${run.file}`);
  return { validationAccuracy: kept.valAccuracy ?? NaN, file: run.file };
}
