import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { PNG } from 'pngjs';
import { describe, expect, it } from 'vitest';

import { digitPng, readDigitPng } from '../lib/cli/images';
import { allDigits, DIGIT_PIXELS, imageBatch, loadMnist, MNIST_MEAN, MNIST_STD } from '../lib/cli/mnist';
import { Random } from '../lib/core/random';

function key(pixels: Float32Array, i: number): string {
  return Array.from(pixels.subarray(i * DIGIT_PIXELS, (i + 1) * DIGIT_PIXELS), (v) => Math.round(v * 255)).join(',');
}

describe('MNIST digits of the mnist package', () => {
  it('has 10,000 labelled 28×28 digits of every class', () => {
    const all = allDigits();
    expect(all.count).toBe(10000);
    expect(all.pixels.length).toBe(10000 * 784);
    for (let c = 0; c < 10; c++) expect(all.labels.filter((l) => l === c).length).toBeGreaterThan(800);
  });

  it('splits them with a fixed seed into disjoint sets; the test digits do not depend on the training size', () => {
    const a = loadMnist(), b = loadMnist({ trainSize: 300, testSize: 2000 }), c = loadMnist();
    expect([a.train.count, a.test.count]).toEqual([8000, 2000]);
    expect(Array.from(a.test.labels)).toEqual(Array.from(b.test.labels));
    expect(Array.from(a.train.labels)).toEqual(Array.from(c.train.labels));
    const train = new Set(Array.from({ length: a.train.count }, (_, i) => key(a.train.pixels, i)));
    const overlap = Array.from({ length: a.test.count }, (_, i) => key(a.test.pixels, i)).filter((k) => train.has(k));
    expect(overlap.length).toBeLessThan(5); // the package may hold a few identical images; the indices are disjoint
    expect(() => loadMnist({ trainSize: 9000, testSize: 2000 })).toThrow(/at most 10000 digits/);
  });

  it('normalises batches and shifts them by at most maxShift pixels', () => {
    const { test } = loadMnist({ trainSize: 1, testSize: 4 });
    const plain = imageBatch(test, [2]);
    expect(plain.shape).toEqual([1, 1, 28, 28]);
    expect(plain.data[0]).toBeCloseTo(-MNIST_MEAN / MNIST_STD, 5);
    const i = test.pixels.subarray(2 * DIGIT_PIXELS).findIndex((v) => v > 0.5);
    expect(plain.data[i]).toBeCloseTo((test.pixels[2 * DIGIT_PIXELS + i] - MNIST_MEAN) / MNIST_STD, 5);
    const shifted = imageBatch(test, [2, 2, 2, 2, 2, 2], { rng: new Random(3), maxShift: 2 });
    let moved = 0;
    for (let b = 0; b < 6; b++) {
      const img = shifted.data.subarray(b * DIGIT_PIXELS, (b + 1) * DIGIT_PIXELS);
      const same = (dx: number, dy: number) => {
        for (let y = 2; y < 26; y++) for (let x = 2; x < 26; x++) if (Math.abs(img[(y + dy) * 28 + x + dx] - plain.data[y * 28 + x]) > 1e-5) return false;
        return true;
      };
      const offsets = [-2, -1, 0, 1, 2].flatMap((dx) => [-2, -1, 0, 1, 2].map((dy) => [dx, dy]));
      const hit = offsets.find(([dx, dy]) => same(dx, dy));
      expect(hit, `image ${b}`).toBeDefined();
      if (hit![0] !== 0 || hit![1] !== 0) moved++;
    }
    expect(moved).toBeGreaterThan(0);
  });
});

describe('digit PNGs', () => {
  it('round-trips a digit through PNG, and inverts and resizes a dark digit on white paper', () => {
    const { test } = loadMnist({ trainSize: 1, testSize: 1 });
    const digit = test.pixels.slice(0, DIGIT_PIXELS);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nf-png-'));
    fs.writeFileSync(path.join(dir, 'd.png'), digitPng(digit));
    const back = readDigitPng(path.join(dir, 'd.png'));
    for (let i = 0; i < DIGIT_PIXELS; i++) expect(Math.abs(back[i] - digit[i])).toBeLessThanOrEqual(0.5 / 255 + 1e-6);

    // The same digit drawn black on white at 56×56 in RGBA.
    const big = new PNG({ width: 56, height: 56 });
    for (let y = 0; y < 56; y++)
      for (let x = 0; x < 56; x++) {
        const v = Math.round(255 * (1 - digit[Math.floor(y / 2) * 28 + Math.floor(x / 2)])), o = 4 * (y * 56 + x);
        big.data[o] = big.data[o + 1] = big.data[o + 2] = v;
        big.data[o + 3] = 255;
      }
    fs.writeFileSync(path.join(dir, 'big.png'), PNG.sync.write(big));
    const read = readDigitPng(path.join(dir, 'big.png'));
    for (let i = 0; i < DIGIT_PIXELS; i++) expect(Math.abs(read[i] - digit[i])).toBeLessThan(0.01);
    expect(() => readDigitPng(path.join(dir, 'missing.png'))).toThrow(/no such file/);
  });
});
