import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { PNG } from 'pngjs';
import { describe, expect, it } from 'vitest';

import { MAE_MODEL, runMae, TARGET_RATIO } from '../examples/mae';

describe('masked-autoencoder example', () => {
  it('trains a tiny run, scores hidden patches against the baselines and draws the reconstructions', async () => {
    const out = fs.mkdtempSync(path.join(os.tmpdir(), 'nf-mae-'));
    const lines: string[] = [];
    const model = { ...MAE_MODEL, dModel: 32, numHeads: 2, dFF: 64, encoderDepth: 1, decoderDepth: 1 };
    const r = await runMae({ epochs: 1, batchSize: 50, lr: 2e-3, trainSize: 200, testSize: 100, seed: 0, out, model, log: (l) => lines.push(l) });
    for (const v of [r.testMse, r.meanImageMse, r.meanPixelMse]) expect(v).toBeGreaterThan(0);
    expect(r.meanImageMse).toBeLessThan(r.meanPixelMse);
    expect(r.ratio).toBeCloseTo(r.testMse / r.meanImageMse, 6);
    expect(r.reachedTarget).toBe(r.ratio <= TARGET_RATIO);
    expect(lines[0]).toContain(`target: test hidden-patch MSE ≤ ${TARGET_RATIO}× the mean image's`);
    expect(lines.at(-1)).toMatch(/Test hidden-patch MSE [\d.]+; baselines: mean image [\d.]+, mean pixel [\d.]+; [\d.]+× the mean image's error \(target ≤ [\d.]+×: (reached|NOT reached)\)/);
    const png = PNG.sync.read(fs.readFileSync(r.picture));
    expect(png.width).toBeGreaterThan(400);
  });
});
