/**
 * ImageFolder: torchvision's layout (sorted classes, class_to_idx, images sorted by path, nested
 * folders, extensions), its transforms (the random resized crop's boxes, the eval transform's
 * geometry, the flip, the normalisation into CHW) on generated images of awkward sizes, and its
 * errors: bad folders, bad options, undecodable files, and a missing optional package.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import sharp from 'sharp';
import { afterAll, describe, expect, it } from 'vitest';

import { evalGeometry, randomResizedCropBox, resolveTransform, roundHalfEven } from '../lib/data/transforms';
import { IMAGENET_MEAN, IMAGENET_STD, ImageFolder, NodeformerError } from '../lib/index';
import { requireOptional } from '../lib/core/optional';
import { mulberry32 } from '../lib/core/random';
import { makeImageFolder } from './support/image_folder';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'nf-imgfolder-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

function expectError(f: () => unknown, code: string, message: RegExp): void {
  let err: unknown;
  try {
    f();
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(NodeformerError);
  expect((err as NodeformerError).code).toBe(code);
  expect((err as Error).message).toMatch(message);
}

/** A solid image file of one colour (lossless PNG, optionally grey or with alpha). */
async function solid(file: string, width: number, height: number, rgb: [number, number, number], channels: 1 | 3 | 4 = 3): Promise<void> {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const bg = { r: rgb[0], g: rgb[1], b: rgb[2], alpha: 1 };
  let img = sharp({ create: { width, height, channels: channels === 4 ? 4 : 3, background: bg } });
  if (channels === 1) img = img.greyscale();
  await img.png().toFile(file);
}

describe('ImageFolder layout', () => {
  it('sorts classes and images like torchvision, walks nested folders and filters extensions', async () => {
    const root = path.join(tmp, 'layout');
    await solid(path.join(root, 'zebra', 'b.png'), 9, 7, [1, 2, 3]);
    await solid(path.join(root, 'zebra', 'A.PNG'), 9, 7, [1, 2, 3]);
    await solid(path.join(root, 'zebra', 'nested', 'c.png'), 9, 7, [1, 2, 3]);
    await solid(path.join(root, 'Ant', 'x.png'), 5, 11, [1, 2, 3]);
    fs.writeFileSync(path.join(root, 'Ant', 'notes.txt'), 'not an image');
    fs.writeFileSync(path.join(root, 'README'), 'a file next to the class folders');
    await solid(path.join(root, 'cat', 'y.png'), 13, 13, [1, 2, 3]);
    const ds = new ImageFolder(root, { imageSize: 8 });
    expect(ds.classes).toEqual(['Ant', 'cat', 'zebra']); // code point order, as Python's sorted()
    expect(ds.classToIdx).toEqual({ Ant: 0, cat: 1, zebra: 2 });
    expect(ds.samples.map((s) => [path.relative(root, s.path), s.target])).toEqual([
      ['Ant/x.png', 0], ['cat/y.png', 1], ['zebra/A.PNG', 2], ['zebra/b.png', 2], ['zebra/nested/c.png', 2],
    ]);
    expect(ds.length).toBe(5);
    expect(Array.from(ds.targets)).toEqual([0, 1, 2, 2, 2]);
    const onlyTxt = () => new ImageFolder(root, { extensions: ['.TXT'] });
    expectError(onlyTxt, 'ERR_NF_INVALID_ARG', /class folders cat, zebra hold no images \(\.txt\)/);
    const sub = ds.subset([4, 0], 'train');
    expect(sub.samples.map((s) => s.target)).toEqual([2, 0]);
    expect(sub.classes).toBe(ds.classes);
    expect(sub.transform.mode).toBe('train');
    expect(ds.transform.mode).toBe('eval');
    expect(sub).toBeInstanceOf(ImageFolder);
  });

  it('rejects bad folders and options with messages naming the argument', async () => {
    const root = path.join(tmp, 'bad');
    fs.mkdirSync(path.join(root, 'empty-class'), { recursive: true });
    await solid(path.join(root, 'full', 'a.png'), 4, 4, [0, 0, 0]);
    expectError(() => new ImageFolder(path.join(tmp, 'no-such-folder')), 'ERR_NF_INVALID_ARG', /for root but received string/);
    expectError(() => new ImageFolder(path.join(root, 'full')), 'ERR_NF_INVALID_ARG', /received .*full, a folder without subfolders/);
    expectError(() => new ImageFolder(root), 'ERR_NF_INVALID_ARG', /class folder empty-class holds no images/);
    fs.rmdirSync(path.join(root, 'empty-class'));
    expectError(() => new ImageFolder(root, { imagesize: 8 } as never), 'ERR_NF_INVALID_ARG', /'imagesize' \(did you mean 'imageSize'\?\)/);
    expectError(() => new ImageFolder(root, { imageSize: 0 }), 'ERR_NF_INVALID_ARG', /imageSize/);
    expectError(() => new ImageFolder(root, { transform: 'test' as never }), 'ERR_NF_INVALID_ARG', /transform\.mode/);
    expectError(() => new ImageFolder(root, { transform: { mode: 'train', scale: [0.5, 0.1] } }), 'ERR_NF_INVALID_ARG', /transform\.scale/);
    expectError(() => new ImageFolder(root, { transform: { mode: 'train', flips: 1 } as never }), 'ERR_NF_INVALID_ARG', /did you mean 'flip'/);
    expectError(() => new ImageFolder(root, { std: [1, 0, 1] }), 'ERR_NF_INVALID_ARG', /three finite positive numbers .* for std/);
    expectError(() => new ImageFolder(root, { extensions: ['jpg'] }), 'ERR_NF_INVALID_ARG', /extensions/);
    const ds = new ImageFolder(root, { imageSize: 4 });
    expectError(() => ds.subset([1]), 'ERR_NF_INVALID_ARG', /integers in \[0, 1\) for indices/);
    await expect(ds.get(3)).rejects.toThrow(/an integer in \[0, 1\) for index/);
  });

  it('says which npm install adds a missing optional package', () => {
    expectError(() => requireOptional('nodeformer-no-such-package', 'This feature needs it'), 'ERR_NF_MISSING_PACKAGE',
      /This feature needs it, but nodeformer-no-such-package is not installed .*: npm install nodeformer-no-such-package$/);
    expect(() => requireOptional('sharp', 'x')).not.toThrow();
  });
});

describe('ImageFolder transforms', () => {
  it('normalises into CHW with the given mean and std, from grey, RGB, RGBA, 16-bit and WebP files of any size', async () => {
    const root = path.join(tmp, 'solid');
    await solid(path.join(root, 'a', 'rgb.png'), 37, 23, [200, 100, 50]);
    await solid(path.join(root, 'a', 'rgba.png'), 19, 41, [200, 100, 50], 4);
    await solid(path.join(root, 'b', 'grey.png'), 8, 8, [90, 90, 90], 1);
    await sharp({ create: { width: 30, height: 30, channels: 3, background: { r: 200, g: 100, b: 50 } } }).webp({ lossless: true })
      .toFile(path.join(root, 'b', 'lossless.webp'));
    await sharp({ create: { width: 21, height: 17, channels: 3, background: { r: 200, g: 100, b: 50 } } }).toColourspace('rgb16').png()
      .toFile(path.join(root, 'b', 'sixteen-bit.png'));
    expect((await sharp(path.join(root, 'b', 'sixteen-bit.png')).metadata()).depth).toBe('ushort');
    for (const [transform, size] of [['eval', 13], ['train', 7]] as const) {
      const ds = new ImageFolder(root, { imageSize: size, transform });
      expect(ds.transform.mean).toEqual([...IMAGENET_MEAN]);
      const want = (rgb: number[]) => rgb.flatMap((v, c) => Array<number>(size * size).fill(Math.fround((v / 255 - IMAGENET_MEAN[c]) / IMAGENET_STD[c])));
      for (let i = 0; i < ds.length; i++) {
        const { input, target } = await ds.get(i, 5);
        expect(input.length).toBe(3 * size * size);
        expect(target).toBe(ds.samples[i].target);
        const rgb = ds.samples[i].path.endsWith('grey.png') ? [90, 90, 90] : [200, 100, 50];
        if (ds.samples[i].path.endsWith('sixteen-bit.png')) { // 16 to 8 bits: within one level
          const w = want(rgb);
          expect(Math.max(...Array.from(input, (v, k) => Math.abs(v - w[k]) * IMAGENET_STD[Math.floor(k / (size * size))] * 255))).toBeLessThan(1.01);
        } else expect(Array.from(input), `${transform} ${ds.samples[i].path}`).toEqual(want(rgb));
      }
    }
    const custom = new ImageFolder(root, { imageSize: 2, mean: [0, 0.5, 1], std: [1, 2, 0.5] });
    const { input } = await custom.get(0);
    expect(Array.from(input)).toEqual([200 / 255, 200 / 255, 200 / 255, 200 / 255, ...Array(4).fill((100 / 255 - 0.5) / 2), ...Array(4).fill((50 / 255 - 1) / 0.5)]
      .map(Math.fround));
  });

  it('flips horizontally with the given probability, and crops the same way for the same seed', async () => {
    // Left half black, right half white; scale 1 and the image's own ratio make the crop the whole image.
    const root = path.join(tmp, 'halves'), w = 24, h = 16;
    const px = Buffer.alloc(w * h * 3);
    for (let y = 0; y < h; y++) for (let x = w / 2; x < w; x++) px.fill(255, 3 * (y * w + x), 3 * (y * w + x) + 3);
    fs.mkdirSync(path.join(root, 'c'), { recursive: true });
    await sharp(px, { raw: { width: w, height: h, channels: 3 } }).png().toFile(path.join(root, 'c', 'halves.png'));
    const opts = (flip: number) => ({ imageSize: 8, mean: [0, 0, 0] as const, std: [1, 1, 1] as const,
      transform: { mode: 'train' as const, scale: [1, 1] as const, ratio: [w / h, w / h] as const, flip } });
    const left = (x: Float32Array) => x[8 * 4]; // row 4, column 0 of the red plane
    const right = (x: Float32Array) => x[8 * 4 + 7];
    const kept = (await new ImageFolder(root, opts(0)).get(0, 1)).input;
    expect([left(kept), right(kept)]).toEqual([0, 1]);
    const flipped = (await new ImageFolder(root, opts(1)).get(0, 1)).input;
    expect([left(flipped), right(flipped)]).toEqual([1, 0]);
    const half = new ImageFolder(root, opts(0.5));
    const flips = await Promise.all(Array.from({ length: 40 }, async (_, s) => left((await half.get(0, s)).input) === 1));
    expect(flips.filter(Boolean).length).toBeGreaterThan(8);
    expect(flips.filter(Boolean).length).toBeLessThan(32);

    const folder = await makeImageFolder(path.join(tmp, 'random'), { classes: 1, perClass: 1, size: [53, 29], seed: 4 });
    const train = new ImageFolder(folder, { imageSize: 12, transform: 'train' });
    const a = await train.get(0, 77), b = await train.get(0, 77), c = await train.get(0, 78);
    expect(Array.from(a.input)).toEqual(Array.from(b.input));
    expect(Array.from(a.input)).not.toEqual(Array.from(c.input));
  });

  it('draws random resized crop boxes as torchvision does: inside the image, area and ratio in range, the centre when none fits', () => {
    const t = resolveTransform('train', 10, undefined, undefined);
    const rng = mulberry32(3);
    for (let k = 0; k < 2000; k++) {
      const width = 1 + Math.floor(rng() * 300), height = 1 + Math.floor(rng() * 300);
      const box = randomResizedCropBox(width, height, t, rng);
      expect(box.left >= 0 && box.top >= 0 && box.width >= 1 && box.height >= 1).toBe(true);
      expect(box.left + box.width <= width && box.top + box.height <= height, `${width}×${height}: ${JSON.stringify(box)}`).toBe(true);
    }
    // A large image: the first try fits; its area fraction and ratio stay in range (up to the rounding of the sides).
    for (let k = 0; k < 500; k++) {
      const box = randomResizedCropBox(1000, 800, t, rng);
      const area = (box.width * box.height) / 8e5, ratio = box.width / box.height;
      expect(area).toBeGreaterThan(0.08 * 0.99);
      expect(area).toBeLessThanOrEqual(1);
      expect(ratio).toBeGreaterThan((3 / 4) * 0.98);
      expect(ratio).toBeLessThan((4 / 3) * 1.02);
    }
    // A 100×10 strip: no try can fit a ratio of at most 4/3 with 8% of the area, so the centred 13×10 box (round(10 × 4/3)).
    const strip = randomResizedCropBox(100, 10, { ...t, scale: [0.5, 1] }, rng);
    expect(strip).toEqual({ left: 43, top: 0, width: 13, height: 10 });
  });

  it('resizes the shorter side to imageSize / 0.875 and crops the centre (torchvision eval)', () => {
    const t = resolveTransform('eval', 224, undefined, undefined);
    expect(evalGeometry(320, 256, t)).toEqual({ resize: { width: 320, height: 256 }, crop: { left: 48, top: 16, width: 224, height: 224 } });
    expect(evalGeometry(500, 375, t)).toEqual({ resize: { width: 341, height: 256 }, crop: { left: 58, top: 16, width: 224, height: 224 } });
    expect(evalGeometry(37, 91, resolveTransform('eval', 13, undefined, undefined)))
      .toEqual({ resize: { width: 14, height: 34 }, crop: { left: 0, top: 10, width: 13, height: 13 } }); // round(0.5) = 0, round(10.5) = 10
    expect([0.5, 1.5, 2.5, -0.5, 3.2, 3.7].map(roundHalfEven)).toEqual([0, 2, 2, -0, 3, 4]);
  });

  it('names a file that cannot be decoded', async () => {
    const root = path.join(tmp, 'corrupt');
    await solid(path.join(root, 'a', 'good.png'), 8, 8, [9, 9, 9]);
    fs.writeFileSync(path.join(root, 'a', 'bad.jpg'), 'not a jpeg at all');
    const good = fs.readFileSync(path.join(root, 'a', 'good.png'));
    fs.writeFileSync(path.join(root, 'a', 'cut.png'), good.subarray(0, good.length - 30));
    const ds = new ImageFolder(root, { imageSize: 4 });
    const err = await ds.get(ds.samples.findIndex((s) => s.path.endsWith('bad.jpg'))).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NodeformerError);
    expect((err as NodeformerError).code).toBe('ERR_NF_FORMAT');
    expect((err as Error).message).toContain(`Cannot load the image ${path.join(root, 'a', 'bad.jpg')}: `);
    await expect(ds.get(ds.samples.findIndex((s) => s.path.endsWith('cut.png')))).rejects.toThrow(/cut\.png/);
  });
});
