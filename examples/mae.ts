/**
 * Masked autoencoder on MNIST: a ViTEncoder sees each digit with 75% of its 7×7 patches hidden
 * (blanked, and withheld from the decoder's cross-attention), a ViTDecoder predicts the pixels of
 * every patch, and the loss is the MSE on the hidden patches only. Writes a picture of original /
 * masked / reconstructed test digits and reports the hidden-patch MSE against two baselines.
 *
 *   npm run example:mae -- [--epochs 6] [--train-size 8000] [--test-size 2000] [--out nodeformer-mae]
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { parseArgs } from 'node:util';

import { AdamW, cosineWithWarmup, mse, patchify, Tensor, ViTDecoder, ViTEncoder } from '../lib';
import { Random } from '../lib/random';
import { type Digits, DIGIT_PIXELS, DIGIT_SIZE, imageBatch, loadMnist, MNIST_MEAN, MNIST_STD, permutation } from '../lib/cli/mnist';
import { digitRowsSpec, writeChart } from '../lib/cli/plots';

const PATCH = 7;
const PATCHES = (DIGIT_SIZE / PATCH) ** 2;
const PATCH_PIXELS = PATCH * PATCH;
const MASK_RATIO = 0.75;
const MODEL = { imgSize: DIGIT_SIZE, patchSize: PATCH, inChannels: 1, dModel: 64, numHeads: 4, dFF: 128 };

export interface MaeOptions {
  epochs: number;
  batchSize: number;
  lr: number;
  trainSize: number;
  testSize: number;
  seed: number;
  out: string;
  log: (line: string) => void;
}

export interface MaeResult {
  /** Mean squared error on the hidden patches of the test digits (pixels in [0, 1]). */
  testMse: number;
  /** The same error when every hidden pixel is predicted by the training set's mean image. */
  meanImageMse: number;
  /** The same error when every hidden pixel is predicted by the training set's mean pixel value. */
  meanPixelMse: number;
  seconds: number;
  picture: string;
}

/** A random choice of round(75%) hidden patches per image: bool [n, PATCHES], 1 = hidden. */
function randomMask(n: number, rng: Random): Tensor<'bool'> {
  const hidden = Math.round(MASK_RATIO * PATCHES), mask = new Uint8Array(n * PATCHES);
  for (let b = 0; b < n; b++) for (const p of permutation(PATCHES, rng).subarray(0, hidden)) mask[b * PATCHES + p] = 1;
  return Tensor.from(mask, [n, PATCHES]);
}

/** The encoder's view: hidden patches set to the (normalised) background, so it cannot see them. */
function hidePatches(images: Tensor<'float32'>, mask: Tensor<'bool'>): void {
  const background = -MNIST_MEAN / MNIST_STD, g = DIGIT_SIZE / PATCH;
  const n = images.shape[0];
  for (let b = 0; b < n; b++)
    for (let p = 0; p < PATCHES; p++) {
      if (!mask.data[b * PATCHES + p]) continue;
      const y0 = Math.floor(p / g) * PATCH, x0 = (p % g) * PATCH;
      for (let y = y0; y < y0 + PATCH; y++) images.data.fill(background, b * DIGIT_PIXELS + y * DIGIT_SIZE + x0, b * DIGIT_PIXELS + y * DIGIT_SIZE + x0 + PATCH);
    }
}

/** The decoder's padding mask over the encoder's tokens [CLS, patches]: hidden patches are padding. */
function memoryMask(mask: Tensor<'bool'>): Tensor<'bool'> {
  const n = mask.shape[0], out = new Uint8Array(n * (PATCHES + 1));
  for (let b = 0; b < n; b++) out.set(mask.data.subarray(b * PATCHES, (b + 1) * PATCHES), b * (PATCHES + 1) + 1);
  return Tensor.from(out, [n, PATCHES + 1]);
}

/** Target pixels [n, PATCHES, 49] in [0, 1] of the digits at `indices`. */
function targetPatches(digits: Digits, indices: ArrayLike<number>): Tensor<'float32'> {
  const raw = new Float32Array(indices.length * DIGIT_PIXELS);
  for (let i = 0; i < indices.length; i++) raw.set(digits.pixels.subarray(indices[i] * DIGIT_PIXELS, (indices[i] + 1) * DIGIT_PIXELS), i * DIGIT_PIXELS);
  const images = Tensor.from(raw, [indices.length, 1, DIGIT_SIZE, DIGIT_SIZE]);
  const patches = patchify(images, PATCH);
  images.dispose();
  return patches;
}

/**
 * One forward of encoder and decoder on a masked batch: the predicted patches [n, PATCHES, 49],
 * and the inputs that backward still reads (dispose them after it).
 */
function reconstruct(encoder: ViTEncoder, decoder: ViTDecoder, digits: Digits, indices: ArrayLike<number>, mask: Tensor<'bool'>) {
  const images = imageBatch(digits, indices);
  hidePatches(images, mask);
  const memory = encoder.forward(images);
  const padding = memoryMask(mask);
  const pred = decoder.forward(memory, { memoryKeyPaddingMask: padding });
  return { pred, saved: [images, memory, padding] };
}

/** Hidden-patch MSE of the model and of the two baselines on `digits` (a fixed mask per digit). */
function evaluate(encoder: ViTEncoder, decoder: ViTDecoder, train: Digits, digits: Digits, seed: number) {
  encoder.eval();
  decoder.eval();
  const meanImage = new Float32Array(DIGIT_PIXELS);
  for (let i = 0; i < train.pixels.length; i++) meanImage[i % DIGIT_PIXELS] += train.pixels[i] / train.count;
  const meanPixel = meanImage.reduce((a, b) => a + b, 0) / DIGIT_PIXELS;
  const meanTensor = Tensor.from(meanImage, [1, 1, DIGIT_SIZE, DIGIT_SIZE]), meanPatchTensor = patchify(meanTensor, PATCH);
  const meanPatches = meanPatchTensor.toArray();
  meanTensor.dispose();
  meanPatchTensor.dispose();
  const rng = new Random(seed);
  let model = 0, image = 0, pixel = 0, count = 0;
  for (let start = 0; start < digits.count; start += 250) {
    const idx = Int32Array.from({ length: Math.min(250, digits.count - start) }, (_, i) => start + i);
    const mask = randomMask(idx.length, rng);
    const { pred, saved } = reconstruct(encoder, decoder, digits, idx, mask);
    const target = targetPatches(digits, idx);
    for (let b = 0; b < idx.length; b++)
      for (let p = 0; p < PATCHES; p++) {
        if (!mask.data[b * PATCHES + p]) continue;
        for (let k = 0; k < PATCH_PIXELS; k++) {
          const i = (b * PATCHES + p) * PATCH_PIXELS + k, t = target.data[i];
          model += (pred.data[i] - t) ** 2;
          image += (meanPatches[p * PATCH_PIXELS + k] - t) ** 2;
          pixel += (meanPixel - t) ** 2;
        }
        count += PATCH_PIXELS;
      }
    for (const t of [mask, pred, target, ...saved]) t.dispose();
  }
  encoder.train();
  decoder.train();
  return { testMse: model / count, meanImageMse: image / count, meanPixelMse: pixel / count };
}

/** Rows of original / masked / reconstructed (visible patches kept, hidden ones predicted). */
async function drawReconstructions(encoder: ViTEncoder, decoder: ViTDecoder, test: Digits, file: string, rows: number): Promise<void> {
  encoder.eval();
  decoder.eval();
  const idx = Int32Array.from({ length: Math.min(rows, test.count) }, (_, i) => i);
  const mask = randomMask(idx.length, new Random(123));
  const { pred, saved } = reconstruct(encoder, decoder, test, idx, mask);
  const g = DIGIT_SIZE / PATCH;
  const images = Array.from(idx, (d, b) => {
    const original = test.pixels.slice(d * DIGIT_PIXELS, (d + 1) * DIGIT_PIXELS), masked = original.slice(), rebuilt = original.slice();
    for (let p = 0; p < PATCHES; p++) {
      if (!mask.data[b * PATCHES + p]) continue;
      for (let k = 0; k < PATCH_PIXELS; k++) {
        const pixel = (Math.floor(p / g) * PATCH + Math.floor(k / PATCH)) * DIGIT_SIZE + (p % g) * PATCH + (k % PATCH);
        masked[pixel] = NaN;
        rebuilt[pixel] = pred.data[(b * PATCHES + p) * PATCH_PIXELS + k];
      }
    }
    return [original, masked, rebuilt];
  });
  for (const t of [mask, pred, ...saved]) t.dispose();
  await writeChart(file, digitRowsSpec(images, ['original', 'masked', 'reconstructed'], 2, 'Masked autoencoder on MNIST test digits',
    '75% of the 7×7 patches hidden (blue); reconstructed = the visible patches + the decoder\'s prediction for the hidden ones'));
}

/** Trains the masked autoencoder and writes its picture; returns the measured errors. */
export async function runMae(o: MaeOptions): Promise<MaeResult> {
  const { train, test } = loadMnist({ trainSize: o.trainSize, testSize: o.testSize });
  const encoder = new ViTEncoder({ ...MODEL, depth: 4, seed: o.seed });
  const decoder = new ViTDecoder({ ...MODEL, depth: 2, seed: o.seed + 1 });
  const params = [...encoder.parameters(), ...decoder.parameters()];
  const opt = new AdamW(params, { lr: o.lr, weightDecay: 0.05 });
  const totalSteps = o.epochs * Math.ceil(train.count / o.batchSize);
  const lr = cosineWithWarmup({ lr: o.lr, warmupSteps: Math.round(0.05 * totalSteps), totalSteps });
  const rng = new Random(o.seed + 2);
  const t0 = performance.now();
  let step = 0;
  o.log(`Masked autoencoder: ViTEncoder (4 blocks) + ViTDecoder (2 blocks), ${params.reduce((n, p) => n + p.size, 0).toLocaleString('en-US')} parameters, ` +
    `${train.count} training digits, ${Math.round(MASK_RATIO * PATCHES)} of ${PATCHES} patches hidden`);
  for (let epoch = 1; epoch <= o.epochs; epoch++) {
    const order = permutation(train.count, rng);
    let lossSum = 0;
    for (let start = 0; start < train.count; start += o.batchSize) {
      await yieldToLoop(); // lets native buffers be recycled between steps
      const idx = order.subarray(start, Math.min(start + o.batchSize, train.count));
      const mask = randomMask(idx.length, rng);
      const { pred, saved } = reconstruct(encoder, decoder, train, idx, mask);
      const target = targetPatches(train, idx);
      const { loss, grad } = mse(pred, target, { mask });
      opt.zeroGrad();
      encoder.backward(decoder.backward(grad)).dispose();
      opt.options.lr = lr(++step);
      opt.step();
      lossSum += loss * idx.length;
      for (const t of [mask, pred, target, grad, ...saved]) t.dispose();
    }
    o.log(`epoch ${epoch}/${o.epochs}  hidden-patch MSE ${(lossSum / train.count).toFixed(4)}  (${((performance.now() - t0) / 1000).toFixed(0)} s)`);
  }
  const seconds = (performance.now() - t0) / 1000;
  const scores = evaluate(encoder, decoder, train, test, o.seed + 3);
  fs.mkdirSync(o.out, { recursive: true });
  const picture = path.join(o.out, 'mae-reconstructions.png');
  await drawReconstructions(encoder, decoder, test, picture, 16);
  o.log(`Test hidden-patch MSE ${scores.testMse.toFixed(4)}; baselines: mean image ${scores.meanImageMse.toFixed(4)}, ` +
    `mean pixel ${scores.meanPixelMse.toFixed(4)} (${(scores.testMse / scores.meanImageMse).toFixed(2)}× the mean image's error); ` +
    `trained in ${seconds.toFixed(1)} s; wrote ${picture}`);
  encoder.dispose();
  decoder.dispose();
  return { ...scores, seconds, picture };
}

if (require.main === module) {
  const { values } = parseArgs({
    options: {
      epochs: { type: 'string', default: '6' },
      'batch-size': { type: 'string', default: '32' },
      lr: { type: 'string', default: '2e-3' },
      'train-size': { type: 'string', default: '8000' },
      'test-size': { type: 'string', default: '2000' },
      seed: { type: 'string', default: '0' },
      out: { type: 'string', default: 'nodeformer-mae' },
    },
  });
  void runMae({
    epochs: Number(values.epochs), batchSize: Number(values['batch-size']), lr: Number(values.lr), trainSize: Number(values['train-size']),
    testSize: Number(values['test-size']), seed: Number(values.seed), out: values.out, log: console.log,
  });
}
