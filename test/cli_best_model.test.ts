/** The command line's best-epoch checkpoint (lib/cli/best_model): saved on improvement, restored or saved at the end. */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { afterAll, describe, expect, it } from 'vitest';

import type { EpochLogs, FitContext } from '../lib/training/callbacks';
import { bestModel } from '../lib/cli/best_model';
import { readSafetensorsMetadata, ViTClassifier } from '../lib/index';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'nf-best-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

const tiny = () => new ViTClassifier({ imgSize: 8, patchSize: 4, inChannels: 1, numClasses: 2, dModel: 8, numHeads: 2, dFF: 16, depth: 1, seed: 1 });
const logs = (epoch: number, loss: number, valLoss?: number) =>
  ({ epoch, step: epoch, loss, ...(valLoss === undefined ? {} : { valLoss }), lr: 1e-3, samples: 1, seconds: 1, samplesPerSecond: 1 }) as EpochLogs;
const ctx = (hasValidation: boolean) => ({ hasValidation }) as FitContext;
const weights = (m: ViTClassifier) => m.parameters().map((p) => Array.from(p.toArray()));

describe('bestModel', () => {
  it('saves the epoch with the lowest validation loss and puts its weights back when later epochs were worse', async () => {
    const model = tiny(), file = path.join(tmp, 'a.safetensors'), cb = bestModel(file, model, { classes: '["a","b"]' });
    await cb.onTrainBegin!(ctx(true));
    await cb.onEpochEnd!(logs(1, 2, 0.5), ctx(true));
    const kept = weights(model);
    for (const p of model.parameters()) p.copyFrom(new Float32Array(p.size).fill(0.25));
    await cb.onEpochEnd!(logs(2, 1, 0.9), ctx(true));
    expect(cb.epoch).toBe(1);
    cb.finish();
    expect(weights(model)).toEqual(kept);
    expect(readSafetensorsMetadata(file).classes).toBe('["a","b"]');
    model.dispose();
  });

  it('follows the training loss without validation, and saves the last weights when no epoch ever improved (NaN)', async () => {
    const model = tiny(), file = path.join(tmp, 'b.safetensors'), cb = bestModel(file, model);
    await cb.onTrainBegin!(ctx(false));
    await cb.onEpochEnd!(logs(1, NaN), ctx(false));
    await cb.onEpochEnd!(logs(2, NaN), ctx(false));
    expect(fs.existsSync(file)).toBe(false);
    cb.finish();
    expect(cb.epoch).toBe(2);
    const saved = ViTClassifier.load(file);
    expect(weights(saved)).toEqual(weights(model));
    saved.dispose();
    model.dispose();
  });
});
