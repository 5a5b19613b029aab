/**
 * `nodeformer train --data <folder>`'s data: an image folder (root/<class>/<image>) split into
 * training and validation images by a seeded shuffle of its file list, each part batched by a
 * DataLoader (training: random resized crops and flips, reshuffled every epoch; validation: the
 * eval transform, in order), and the metadata that a checkpoint of such a model carries so that
 * `nodeformer predict` reads its pictures as training did and names their classes.
 */
import { ImageFolder } from '../data/image_folder';
import { DataLoader } from '../data/loader';
import { type ImageTransform, resolveTransform } from '../data/transforms';
import { NodeformerError } from '../validation/errors';
import { DistributedSampler } from '../distributed/sampler';
import { UsageError } from './usage';

/** What folderSource reads. */
export interface FolderSourceOptions {
  /** The image folder. */
  data: string;
  /** Side of the square images the model sees. */
  imageSize: number;
  /** Fraction of the images kept for validation, in [0, 1) (0: none). */
  valSplit: number;
  /** Seed of the split, the shuffles and the augmentation. */
  seed: number;
  batchSize: number;
  /** Decoding worker threads per loader (default: DataLoader's). */
  workers?: number;
}

/** The training and validation batches of a folder, and its class names. */
export interface FolderSource {
  train: DataLoader;
  /** Null when valSplit is 0. */
  validation: DataLoader | null;
  classes: readonly string[];
  /** The eval transform (what predict applies), with the size and normalisation. */
  transform: ImageTransform;
}

/**
 * Opens `o.data` and splits it: round(valSplit × n) images (at least 1 when valSplit > 0) for
 * validation, the rest for training. A folder that is not an image folder, or too small to split,
 * is a UsageError; ERR_NF_MISSING_PACKAGE when sharp is not installed.
 */
export function folderSource(o: FolderSourceOptions): FolderSource {
  let all: ImageFolder;
  try {
    all = new ImageFolder(o.data, { imageSize: o.imageSize, transform: 'eval' });
  } catch (e) {
    if (e instanceof NodeformerError && e.code === 'ERR_NF_INVALID_ARG') throw new UsageError(`--data ${o.data}: ${e.message}`);
    throw e;
  }
  const n = all.length, nVal = o.valSplit > 0 ? Math.max(1, Math.round(o.valSplit * n)) : 0;
  if (n - nVal < 1) throw new UsageError(`--data ${o.data} holds ${n} image${n === 1 ? '' : 's'}: too few to keep ${nVal} for validation (--val-split ${o.valSplit})`);
  const order = new DistributedSampler(n, { seed: o.seed, rank: 0, worldSize: 1 }).indices();
  const loader = (part: ImageFolder, shuffle: boolean) =>
    new DataLoader(part, { batchSize: o.batchSize, shuffle, seed: o.seed, workers: o.workers });
  return {
    train: loader(all.subset(order.subarray(nVal), 'train'), true),
    validation: nVal ? loader(all.subset(order.subarray(0, nVal)), false) : null,
    classes: all.classes,
    transform: all.transform,
  };
}

/** The checkpoint metadata of a model trained on a folder: its class names and the eval transform. */
export function folderMetadata(classes: readonly string[], t: ImageTransform): Record<string, string> {
  return { classes: JSON.stringify(classes), transform: JSON.stringify({ imageSize: t.imageSize, mean: t.mean, std: t.std, cropFraction: t.cropFraction }) };
}

/** The class names and eval transform of a checkpoint written with folderMetadata; null for other checkpoints (the digit demo's). */
export function readFolderMetadata(metadata: Record<string, string>, file: string): { classes: string[]; transform: ImageTransform } | null {
  if (metadata.classes === undefined) return null;
  try {
    const classes = JSON.parse(metadata.classes) as string[];
    const t = JSON.parse(metadata.transform) as { imageSize: number; mean: unknown; std: unknown; cropFraction: number };
    if (!Array.isArray(classes) || !classes.every((c) => typeof c === 'string')) throw new Error('classes is not a list of names');
    return { classes, transform: resolveTransform({ mode: 'eval', cropFraction: t.cropFraction }, t.imageSize, t.mean, t.std) };
  } catch (e) {
    throw new UsageError(`Cannot read the class names and transform of ${file}: ${(e as Error).message}`);
  }
}
