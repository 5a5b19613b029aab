/**
 * ImageFolder: a labelled image dataset in torchvision's layout, root/<class>/**\/<image>, classes
 * sorted by name and numbered from 0, images of each class sorted by path. Images are decoded with
 * sharp (an optional peer dependency: `npm install sharp`), transformed as torchvision's standard
 * recipes do (lib/data/transforms.ts) and normalised into CHW float32. DataLoader batches it on
 * worker threads; get() loads one sample here.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

import { invalidArg, NodeformerError } from '../validation/errors';
import { positiveInt, seedOf } from '../validation/values';
import { OptionKeys } from '../validation/options';
import { requireOptional } from '../core/optional';
import { loadSample, type Sharp } from './decode';
import { type ImageTransform, resolveTransform, type TransformOptions } from './transforms';

/** Options of ImageFolder. */
export interface ImageFolderOptions {
  /** Side of the square images it yields (default 224). */
  imageSize?: number;
  /** Per-channel mean (R, G, B) of values in [0, 1], subtracted before dividing by std (default ImageNet's). */
  mean?: readonly [number, number, number];
  /** Per-channel standard deviation (default ImageNet's). */
  std?: readonly [number, number, number];
  /** 'train' (random resized crop and flip), 'eval' (resize and centre crop; the default) or their settings. */
  transform?: 'train' | 'eval' | TransformOptions;
  /** File extensions that count as images, case-insensitive (default .jpg, .jpeg, .png, .webp). */
  extensions?: readonly string[];
}
const OPTIONS = new OptionKeys<ImageFolderOptions>('ImageFolder options', {
  imageSize: true, mean: true, std: true, transform: true, extensions: true,
});

/** One image of the folder and the index of its class. */
export interface ImageSample {
  path: string;
  target: number;
}

/** Default image extensions (torchvision's, less the formats sharp does not read). */
export const IMAGE_EXTENSIONS: readonly string[] = ['.jpg', '.jpeg', '.png', '.webp'];

const byName = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

function isDirectory(p: string): boolean {
  return fs.statSync(p, { throwIfNoEntry: false })?.isDirectory() ?? false;
}

/** The image files under `dir` (recursively, following links), sorted by path. */
function imagesUnder(dir: string, extensions: readonly string[]): string[] {
  const found: string[] = [];
  for (const name of fs.readdirSync(dir).sort(byName)) {
    const p = path.join(dir, name);
    if (isDirectory(p)) found.push(...imagesUnder(p, extensions));
    else if (extensions.includes(path.extname(name).toLowerCase())) found.push(p);
  }
  return found;
}

/** ERR_NF_INVALID_ARG: "Expected a folder of class folders (root/<class>/<image>) for root but received <root>, <what>". */
function folderError(root: string, what: string): NodeformerError {
  return new NodeformerError('ERR_NF_INVALID_ARG', `Expected a folder of class folders (root/<class>/<image>) for root but received ${root}, ${what}`);
}

function checkExtensions(v: unknown): string[] {
  if (!Array.isArray(v) || v.length === 0 || !v.every((e) => typeof e === 'string' && /^\.[^./\\]+$/.test(e)))
    invalidArg('extensions', "a non-empty array of extensions such as ['.jpg', '.png']", v);
  return v.map((e: string) => e.toLowerCase());
}

/**
 * A dataset of images in class folders. `new ImageFolder('photos', { imageSize: 224, transform:
 * 'train' })` lists photos/<class>/... (the listing is synchronous, as torchvision's); a root that
 * is not a folder, one without class folders, or a class folder without images is an
 * ERR_NF_INVALID_ARG error; ERR_NF_MISSING_PACKAGE when sharp is not installed.
 */
export class ImageFolder {
  /** The folder holding the class folders. */
  readonly root!: string;
  /** Class names (the folder names), sorted; a sample's target indexes this list. */
  readonly classes!: readonly string[];
  /** Class name → index. */
  readonly classToIdx!: Readonly<Record<string, number>>;
  /** Every image and its class, class by class. */
  readonly samples!: readonly ImageSample[];
  /** The transform with every setting filled in, with the output size and normalisation. */
  readonly transform!: ImageTransform;
  private readonly sharp!: Sharp;

  constructor(root: string, options: ImageFolderOptions = {}) {
    const o = OPTIONS.check('options', options);
    const sharp = requireOptional<Sharp>('sharp', 'ImageFolder decodes images with sharp');
    if (typeof root !== 'string' || !isDirectory(root)) invalidArg('root', 'a folder of class folders (root/<class>/<image>)', root);
    const extensions = checkExtensions(o.extensions ?? IMAGE_EXTENSIONS);
    const classes = fs.readdirSync(root).sort(byName).filter((c) => isDirectory(path.join(root, c)));
    if (!classes.length) throw folderError(root, 'a folder without subfolders');
    const samples = classes.flatMap((c, target) => imagesUnder(path.join(root, c), extensions).map((p) => ({ path: p, target })));
    const empty = classes.filter((_, i) => !samples.some((s) => s.target === i));
    if (empty.length)
      throw folderError(root, `whose class folder${empty.length > 1 ? 's' : ''} ${empty.join(', ')} hold${empty.length > 1 ? '' : 's'} ` +
        `no images (${extensions.join(', ')})`);
    Object.assign(this, {
      root, classes, classToIdx: Object.fromEntries(classes.map((c, i) => [c, i])), samples,
      transform: resolveTransform(o.transform ?? 'eval', positiveInt('imageSize', o.imageSize ?? 224), o.mean, o.std),
      sharp,
    });
  }

  /** Number of images. */
  get length(): number {
    return this.samples.length;
  }

  /** The class index of every sample. */
  get targets(): Int32Array {
    return Int32Array.from(this.samples, (s) => s.target);
  }

  /**
   * The samples at `indices` (e.g. a train/validation split) as a dataset of the same classes,
   * with this one's transform or `transform` (the validation part's 'eval').
   */
  subset(indices: ArrayLike<number>, transform?: 'train' | 'eval' | TransformOptions): ImageFolder {
    const idx = Array.from(indices ?? [], (i) => {
      if (!Number.isInteger(i) || i < 0 || i >= this.length) invalidArg('indices', `integers in [0, ${this.length})`, indices);
      return i;
    });
    if (!idx.length) invalidArg('indices', 'at least one index', indices);
    const t = this.transform;
    return Object.assign(Object.create(ImageFolder.prototype) as ImageFolder, {
      ...this, samples: idx.map((i) => this.samples[i]),
      transform: transform === undefined ? t : resolveTransform(transform, t.imageSize, t.mean, t.std),
    });
  }

  /**
   * Sample `index` decoded and transformed on this thread: its image [3, imageSize, imageSize]
   * (CHW float32) and class. `seed` draws the train transform's crop and flip (DataLoader derives
   * one per sample and epoch). An undecodable file is an ERR_NF_FORMAT error naming it.
   */
  async get(index: number, seed = 0): Promise<{ input: Float32Array; target: number }> {
    if (!Number.isInteger(index) || index < 0 || index >= this.length) invalidArg('index', `an integer in [0, ${this.length})`, index);
    const s = this.transform.imageSize, input = new Float32Array(3 * s * s);
    await loadSample(this.sharp, this.samples[index].path, this.transform, seedOf(seed), input, 0);
    return { input, target: this.samples[index].target };
  }
}
