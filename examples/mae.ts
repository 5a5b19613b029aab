/**
 * Masked autoencoder on MNIST: a ViTEncoder sees each digit with 75% of its 7×7 patches hidden
 * (12 of 16 blanked, and withheld from the decoder's cross-attention), a ViTDecoder predicts the
 * pixels of every patch, and the loss is the MSE on the hidden patches only. Both start from the
 * same fixed 2-D sine-cosine positions, as in the MAE paper. Writes a picture of
 * original / masked / reconstructed test digits and reports the hidden-patch MSE on the test
 * digits against two baselines: every hidden pixel predicted by the training set's mean image,
 * and by its mean pixel value.
 *
 * Target: a test hidden-patch MSE of at most TARGET_RATIO (0.75) times the mean image's with the
 * default options (10 epochs, about 2-3 minutes on 2 cores).
 *
 * With --device cuda the models train on the CUDA backend (NF_CUDA_BACKEND=emulator runs it on the
 * SIMT emulator: slow, for tests): the masks and images are made on the host and copied over, and
 * only the predictions come back (for the test error and the picture).
 *
 *   npm run example:mae -- [--epochs N] [--batch-size N] [--lr RATE] [--train-size N] [--test-size N] [--seed N] [--out DIR] [--device cpu|cuda]
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { parseArgs } from 'node:util';

import { AdamW, cosineWithWarmup, mse, native, patchify, Tensor, ViTDecoder, ViTEncoder, type Device } from '../lib';
import { positive, positiveInt, seedOf } from '../lib/validation/values';
import { Random } from '../lib/core/random';
import { type Digits, DIGIT_PIXELS, DIGIT_SIZE, imageBatch, loadMnist, MNIST_MEAN, MNIST_STD, permutation } from '../lib/cli/mnist';
import { digitRowsSpec, writeChart } from '../lib/cli/plots';

const MASK_RATIO = 0.75;
/** The stated target: test hidden-patch MSE at most this fraction of the mean image's. */
export const TARGET_RATIO = 0.75;

/** Shape of the encoder and decoder. */
export interface MaeModel {
  patchSize: number;
  dModel: number;
  numHeads: number;
  dFF: number;
  encoderDepth: number;
  decoderDepth: number;
}

/** The example's model: 7×7 patches (16 tokens), width 64, 4 encoder and 2 decoder blocks. */
export const MAE_MODEL: MaeModel = { patchSize: 7, dModel: 64, numHeads: 4, dFF: 128, encoderDepth: 4, decoderDepth: 2 };

export interface MaeOptions {
  epochs: number;
  batchSize: number;
  /** Peak learning rate of the cosine schedule. */
  lr: number;
  trainSize: number;
  testSize: number;
  seed: number;
  out: string;
  log: (line: string) => void;
  /** Model shape (default MAE_MODEL). */
  model?: MaeModel;
  /** Where the models train (default 'cpu'). */
  device?: Device;
  /** Stop after this many training steps (default: every step of every epoch), for quick checks. */
  maxSteps?: number;
  /** Called after each training step with its loss and the two models (for parity checks). */
  onStep?: (step: number, loss: number, encoder: ViTEncoder, decoder: ViTDecoder) => void;
}

/** The defaults behind `npm run example:mae`. */
export const MAE_DEFAULTS = { epochs: 10, batchSize: 32, lr: 5e-3, trainSize: 8000, testSize: 2000, seed: 0, out: 'nodeformer-mae' };

export interface MaeResult {
  /** Mean squared error on the hidden patches of the test digits (pixels in [0, 1]). */
  testMse: number;
  /** The same error when every hidden pixel is predicted by the training set's mean image. */
  meanImageMse: number;
  /** The same error when every hidden pixel is predicted by the training set's mean pixel value. */
  meanPixelMse: number;
  /** testMse / meanImageMse. */
  ratio: number;
  /** Whether ratio <= TARGET_RATIO. */
  reachedTarget: boolean;
  /** Training time (evaluation and picture excluded). */
  seconds: number;
  picture: string;
}

/** The patch grid of a patch size: P×P patches, g per side, n in all, P·P pixels each. */
interface Grid {
  P: number;
  g: number;
  n: number;
  pixels: number;
}

function gridOf(patchSize: number): Grid {
  const g = DIGIT_SIZE / patchSize;
  return { P: patchSize, g, n: g * g, pixels: patchSize * patchSize };
}

/** Index in a 28×28 digit of pixel k of patch p. */
function pixelIndex(grid: Grid, p: number, k: number): number {
  return (Math.floor(p / grid.g) * grid.P + Math.floor(k / grid.P)) * DIGIT_SIZE + (p % grid.g) * grid.P + (k % grid.P);
}

/**
 * Fixed 2-D sine-cosine positions [patches, D] (as in the MAE paper): the first half of the
 * dimensions encodes a patch's row, the second half its column, each with the 1-D table of
 * Vaswani et al. Encoder and decoder start from the same table, so a hidden patch's query
 * already knows where its visible neighbours are.
 */
function sincos2d(grid: Grid, D: number): Float32Array {
  const half = D / 2, line = new Float32Array(grid.g * half), out = new Float32Array(grid.n * D);
  native.sinusoidalEncoding({ len: grid.g, D: half, out: line });
  for (let p = 0; p < grid.n; p++) {
    out.set(line.subarray(Math.floor(p / grid.g) * half, (Math.floor(p / grid.g) + 1) * half), p * D);
    out.set(line.subarray((p % grid.g) * half, (p % grid.g + 1) * half), p * D + half);
  }
  return out;
}

/** `host` (a cpu tensor) on `device`: itself on cpu, else a copy (and the host tensor is freed). */
function toDevice<T extends Tensor>(host: T, device: Device): T {
  if (device === 'cpu') return host;
  const t = host.to(device) as T;
  host.dispose();
  return t;
}

/** A random choice of round(75%) hidden patches per image: bool [n, patches], 1 = hidden (host memory: the masks are made and read here). */
function randomMask(n: number, grid: Grid, rng: Random): Uint8Array {
  const hidden = Math.round(MASK_RATIO * grid.n), mask = new Uint8Array(n * grid.n);
  for (let b = 0; b < n; b++) for (const p of permutation(grid.n, rng).subarray(0, hidden)) mask[b * grid.n + p] = 1;
  return mask;
}

/** The encoder's view: hidden patches set to the (normalised) background, so it cannot see them. */
function hidePatches(images: Tensor<'float32'>, mask: Uint8Array, grid: Grid): void {
  const background = -MNIST_MEAN / MNIST_STD;
  for (let b = 0; b < images.shape[0]; b++)
    for (let p = 0; p < grid.n; p++) {
      if (!mask[b * grid.n + p]) continue;
      for (let k = 0; k < grid.pixels; k++) images.data[b * DIGIT_PIXELS + pixelIndex(grid, p, k)] = background;
    }
}

/** The decoder's padding mask over the encoder's tokens [CLS, patches]: hidden patches are padding. */
function memoryMask(mask: Uint8Array, n: number, grid: Grid): Tensor<'bool'> {
  const N = grid.n, out = new Uint8Array(n * (N + 1));
  for (let b = 0; b < n; b++) out.set(mask.subarray(b * N, (b + 1) * N), b * (N + 1) + 1);
  return Tensor.from(out, [n, N + 1]);
}

/** Target pixels [n, patches, P·P] in [0, 1] of the digits at `indices`, on `device`. */
function targetPatches(digits: Digits, indices: ArrayLike<number>, grid: Grid, device: Device): Tensor<'float32'> {
  const raw = new Float32Array(indices.length * DIGIT_PIXELS);
  for (let i = 0; i < indices.length; i++) raw.set(digits.pixels.subarray(indices[i] * DIGIT_PIXELS, (indices[i] + 1) * DIGIT_PIXELS), i * DIGIT_PIXELS);
  using images = Tensor.from(raw, [indices.length, 1, DIGIT_SIZE, DIGIT_SIZE]);
  return toDevice(patchify(images, grid.P), device);
}

/** The encoder and decoder of one run. */
interface Mae {
  encoder: ViTEncoder;
  decoder: ViTDecoder;
  grid: Grid;
  device: Device;
}

/**
 * One forward of encoder and decoder on a masked batch: the predicted patches [n, patches, P·P],
 * and the inputs that backward still reads (dispose them after it).
 */
function reconstruct({ encoder, decoder, grid, device }: Mae, digits: Digits, indices: ArrayLike<number>, mask: Uint8Array) {
  const host = imageBatch(digits, indices);
  hidePatches(host, mask, grid);
  const images = toDevice(host, device);
  const memory = encoder.forward(images);
  const padding = toDevice(memoryMask(mask, indices.length, grid), device);
  const pred = decoder.forward(memory, { memoryKeyPaddingMask: padding });
  return { pred, saved: [images, memory, padding] };
}

function setTraining(mae: Mae, on: boolean): void {
  mae.encoder.train(on);
  mae.decoder.train(on);
}

/** Hidden-patch MSE of the model and of the two baselines on `digits` (a fixed mask per digit). */
function evaluate(mae: Mae, train: Digits, digits: Digits, seed: number) {
  const { grid } = mae;
  setTraining(mae, false);
  const meanImage = new Float32Array(DIGIT_PIXELS);
  for (let i = 0; i < train.pixels.length; i++) meanImage[i % DIGIT_PIXELS] += train.pixels[i] / train.count;
  const meanPixel = meanImage.reduce((a, b) => a + b, 0) / DIGIT_PIXELS;
  const rng = new Random(seed);
  let model = 0, image = 0, pixel = 0, count = 0;
  for (let start = 0; start < digits.count; start += 250) {
    const idx = Int32Array.from({ length: Math.min(250, digits.count - start) }, (_, i) => start + i);
    const mask = randomMask(idx.length, grid, rng);
    const { pred, saved } = reconstruct(mae, digits, idx, mask);
    const target = targetPatches(digits, idx, grid, 'cpu'), predicted = pred.toArray();
    for (let b = 0; b < idx.length; b++)
      for (let p = 0; p < grid.n; p++) {
        if (!mask[b * grid.n + p]) continue;
        for (let k = 0; k < grid.pixels; k++) {
          const i = (b * grid.n + p) * grid.pixels + k, t = target.data[i];
          model += (predicted[i] - t) ** 2;
          image += (meanImage[pixelIndex(grid, p, k)] - t) ** 2;
          pixel += (meanPixel - t) ** 2;
        }
        count += grid.pixels;
      }
    for (const t of [pred, target, ...saved]) t.dispose();
  }
  setTraining(mae, true);
  return { testMse: model / count, meanImageMse: image / count, meanPixelMse: pixel / count };
}

/** Rows of original / masked / reconstructed (visible patches kept, hidden ones predicted). */
async function drawReconstructions(mae: Mae, test: Digits, file: string, rows: number): Promise<void> {
  const { grid } = mae;
  setTraining(mae, false);
  const idx = Int32Array.from({ length: Math.min(rows, test.count) }, (_, i) => i);
  const mask = randomMask(idx.length, grid, new Random(123));
  const { pred, saved } = reconstruct(mae, test, idx, mask);
  const predicted = pred.toArray();
  const images = Array.from(idx, (d, b) => {
    const original = test.pixels.slice(d * DIGIT_PIXELS, (d + 1) * DIGIT_PIXELS), masked = original.slice(), rebuilt = original.slice();
    for (let p = 0; p < grid.n; p++) {
      if (!mask[b * grid.n + p]) continue;
      for (let k = 0; k < grid.pixels; k++) {
        masked[pixelIndex(grid, p, k)] = NaN;
        rebuilt[pixelIndex(grid, p, k)] = predicted[(b * grid.n + p) * grid.pixels + k];
      }
    }
    return [original, masked, rebuilt];
  });
  for (const t of [pred, ...saved]) t.dispose();
  setTraining(mae, true);
  const hidden = Math.round(MASK_RATIO * grid.n);
  await writeChart(file, digitRowsSpec(images, ['original', 'masked', 'reconstructed'], 2, 'Masked autoencoder on MNIST test digits',
    [`${hidden} of the ${grid.n} ${grid.P}×${grid.P} patches hidden (blue)`, 'reconstructed = the visible patches + the decoder\'s prediction for the hidden ones']));
}

/** Trains the masked autoencoder and writes its picture; returns the measured errors. */
export async function runMae(o: MaeOptions): Promise<MaeResult> {
  const shape = o.model ?? MAE_MODEL;
  const grid = gridOf(shape.patchSize);
  const { train, test } = loadMnist({ trainSize: o.trainSize, testSize: o.testSize });
  const device = o.device ?? 'cpu';
  const vit = { imgSize: DIGIT_SIZE, patchSize: grid.P, inChannels: 1, dModel: shape.dModel, numHeads: shape.numHeads, dFF: shape.dFF, device };
  const mae: Mae = {
    encoder: new ViTEncoder({ ...vit, depth: shape.encoderDepth, seed: o.seed }),
    decoder: new ViTDecoder({ ...vit, depth: shape.decoderDepth, seed: o.seed + 1 }),
    grid,
    device,
  };
  const positions = sincos2d(grid, shape.dModel);
  const encoderPositions = new Float32Array((grid.n + 1) * shape.dModel);
  encoderPositions.set(positions, shape.dModel); // the CLS token's row is 0
  mae.encoder.pos_embed.copyFrom(encoderPositions);
  mae.decoder.pos_embed.copyFrom(positions);
  const params = [...mae.encoder.parameters(), ...mae.decoder.parameters()];
  const opt = new AdamW(params, { lr: o.lr, weightDecay: 0.05 });
  const totalSteps = o.epochs * Math.ceil(train.count / o.batchSize);
  const lr = cosineWithWarmup({ lr: o.lr, warmupSteps: Math.round(0.05 * totalSteps), totalSteps });
  const rng = new Random(o.seed + 2);
  let step = 0;
  o.log(`Masked autoencoder: ViTEncoder (${shape.encoderDepth} blocks) + ViTDecoder (${shape.decoderDepth} blocks) of width ${shape.dModel}, ` +
    `${params.reduce((n, p) => n + p.size, 0).toLocaleString('en-US')} parameters; ${train.count} training digits, ` +
    `${Math.round(MASK_RATIO * grid.n)} of ${grid.n} ${grid.P}×${grid.P} patches hidden; target: test hidden-patch MSE ≤ ${TARGET_RATIO}× the mean image's`);
  const t0 = performance.now();
  const maxSteps = o.maxSteps ?? Infinity;
  for (let epoch = 1; epoch <= o.epochs && step < maxSteps; epoch++) {
    const order = permutation(train.count, rng);
    let lossSum = 0;
    for (let start = 0; start < train.count && step < maxSteps; start += o.batchSize) {
      await yieldToLoop(); // lets native buffers be recycled between steps
      const idx = order.subarray(start, Math.min(start + o.batchSize, train.count));
      const hidden = randomMask(idx.length, grid, rng);
      const { pred, saved } = reconstruct(mae, train, idx, hidden);
      const target = targetPatches(train, idx, grid, device), mask = toDevice(Tensor.from(hidden, [idx.length, grid.n]), device);
      const { loss, grad } = mse(pred, target, { mask });
      opt.zeroGrad();
      mae.encoder.backward(mae.decoder.backward(grad)).dispose();
      opt.options.lr = lr(++step);
      opt.step();
      lossSum += loss * idx.length;
      o.onStep?.(step, loss, mae.encoder, mae.decoder);
      for (const t of [mask, pred, target, grad, ...saved]) t.dispose();
    }
    o.log(`epoch ${epoch}/${o.epochs}  train hidden-patch MSE ${(lossSum / train.count).toFixed(4)}  (${((performance.now() - t0) / 1000).toFixed(0)} s)`);
  }
  const seconds = (performance.now() - t0) / 1000;
  const scores = evaluate(mae, train, test, o.seed + 3);
  fs.mkdirSync(o.out, { recursive: true });
  const picture = path.join(o.out, 'mae-reconstructions.png');
  await drawReconstructions(mae, test, picture, 16);
  const ratio = scores.testMse / scores.meanImageMse, reachedTarget = ratio <= TARGET_RATIO;
  o.log(`Test hidden-patch MSE ${scores.testMse.toFixed(4)}; baselines: mean image ${scores.meanImageMse.toFixed(4)}, ` +
    `mean pixel ${scores.meanPixelMse.toFixed(4)}; ${ratio.toFixed(2)}× the mean image's error ` +
    `(target ≤ ${TARGET_RATIO}×: ${reachedTarget ? 'reached' : 'NOT reached'}); trained in ${seconds.toFixed(1)} s; wrote ${picture}`);
  mae.encoder.dispose();
  mae.decoder.dispose();
  return { ...scores, ratio, reachedTarget, seconds, picture };
}

const HELP = `Usage: npm run example:mae -- [options]

Trains a masked autoencoder (ViTEncoder + ViTDecoder) on MNIST with 75% of the patches hidden and
reports the hidden-patch MSE on test digits against the mean-image baseline (target ≤ ${TARGET_RATIO}×).

Options:
  --epochs N       training epochs (default ${MAE_DEFAULTS.epochs})
  --batch-size N   digits per step (default ${MAE_DEFAULTS.batchSize})
  --lr RATE        peak learning rate (default ${MAE_DEFAULTS.lr})
  --train-size N   training digits (default ${MAE_DEFAULTS.trainSize})
  --test-size N    test digits (default ${MAE_DEFAULTS.testSize})
  --seed N         initialisation, mask and batch-order seed (default ${MAE_DEFAULTS.seed})
  --out DIR        output folder (default ${MAE_DEFAULTS.out})
  --device D       cpu (default) or cuda
  -h, --help       this text`;

async function main(): Promise<void> {
  const d = MAE_DEFAULTS;
  const { values } = parseArgs({
    options: {
      epochs: { type: 'string', default: String(d.epochs) },
      'batch-size': { type: 'string', default: String(d.batchSize) },
      lr: { type: 'string', default: String(d.lr) },
      'train-size': { type: 'string', default: String(d.trainSize) },
      'test-size': { type: 'string', default: String(d.testSize) },
      seed: { type: 'string', default: String(d.seed) },
      out: { type: 'string', default: d.out },
      device: { type: 'string', default: 'cpu' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) return console.log(HELP);
  const r = await runMae({
    epochs: positiveInt('--epochs', Number(values.epochs)), batchSize: positiveInt('--batch-size', Number(values['batch-size'])),
    lr: positive('--lr', Number(values.lr)), trainSize: positiveInt('--train-size', Number(values['train-size'])),
    testSize: positiveInt('--test-size', Number(values['test-size'])), seed: seedOf(Number(values.seed)), out: values.out, log: console.log,
    device: values.device as Device,
  });
  if (!r.reachedTarget) process.exitCode = 1;
}

if (require.main === module) {
  main().catch((e: Error) => {
    console.error(e.message);
    process.exitCode = 1;
  });
}
