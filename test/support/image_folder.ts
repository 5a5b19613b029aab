/**
 * Image folders for the data tests, the CLI test and bench/image_loader.ts, drawn with sharp from
 * seeded pixels: class k is a disc (a square for classes 6 to 11) of its own colour on a grey of
 * its own, placed and sized at random, with noise, so that classes are learnable and every image
 * decodes differently.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

import sharp from 'sharp';

import { mulberry32 } from '../../lib/core/random';

/** Colours of the classes' shapes (class k: COLOURS[k % 6]; the background is a grey of its own). */
const COLOURS = [[220, 40, 40], [40, 180, 60], [50, 70, 230], [230, 200, 40], [160, 60, 200], [40, 200, 210]];

export interface FolderSpec {
  classes: number;
  perClass: number;
  /** Width and height, or a function of the image's index within its class (awkward sizes). */
  size: [number, number] | ((i: number) => [number, number]);
  format?: 'jpeg' | 'png' | 'webp';
  seed?: number;
}

/** Interleaved RGB pixels of an image of class `k`. */
export function drawImage(k: number, width: number, height: number, rng: () => number): Buffer {
  const px = Buffer.alloc(width * height * 3);
  const grey = 30 + 20 * (k % COLOURS.length), fg = COLOURS[k % COLOURS.length], bg = [grey, grey, grey];
  const square = Math.floor(k / COLOURS.length) % 2 === 1;
  const r = (0.2 + 0.2 * rng()) * Math.min(width, height), cx = r + rng() * (width - 2 * r), cy = r + rng() * (height - 2 * r);
  for (let y = 0; y < height; y++)
    for (let x = 0; x < width; x++) {
      const inside = square ? Math.max(Math.abs(x - cx), Math.abs(y - cy)) < r : (x - cx) ** 2 + (y - cy) ** 2 < r * r;
      const c = inside ? fg : bg;
      for (let ch = 0; ch < 3; ch++) px[3 * (y * width + x) + ch] = Math.max(0, Math.min(255, c[ch] * (0.6 + 0.4 * (y / height)) + 40 * (rng() - 0.5)));
    }
  return px;
}

/** Writes root/class-<k>/<i>.<ext> for every class and image; returns root. */
export async function makeImageFolder(root: string, spec: FolderSpec): Promise<string> {
  const rng = mulberry32(spec.seed ?? 1), format = spec.format ?? 'jpeg';
  for (let k = 0; k < spec.classes; k++) {
    const dir = path.join(root, `class-${k}`);
    fs.mkdirSync(dir, { recursive: true });
    for (let i = 0; i < spec.perClass; i++) {
      const [width, height] = typeof spec.size === 'function' ? spec.size(i) : spec.size;
      await sharp(drawImage(k, width, height, rng), { raw: { width, height, channels: 3 } })
        .toFormat(format).toFile(path.join(dir, `${String(i).padStart(4, '0')}.${format === 'jpeg' ? 'jpg' : format}`));
    }
  }
  return root;
}

/** Threads of this process (Linux: /proc/self/status), to see that workers are gone. */
export function threadCount(): number {
  return Number(/^Threads:\s+(\d+)/m.exec(fs.readFileSync('/proc/self/status', 'utf8'))![1]);
}
