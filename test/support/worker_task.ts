/**
 * A small training and inference task, run in worker threads by test/workers.test.ts (bundled)
 * and in the main thread for the expected results: train a small ViTClassifier for a few steps
 * through trainStepAsync, then classify in eval mode.
 */
import { isMainThread, parentPort, workerData } from 'node:worker_threads';

import { AdamW, Tensor, trainStepAsync, ViTClassifier } from '../../lib';
import { Random } from '../../lib/core/random';

export interface TaskResult {
  losses: number[];
  logits: number[];
}

export async function runTask(seed: number, steps: number): Promise<TaskResult> {
  const model = new ViTClassifier({ imgSize: 16, patchSize: 4, inChannels: 1, numClasses: 4, dModel: 32, numHeads: 4, dFF: 64,
    depth: 2, dropout: 0.1, seed });
  const opt = new AdamW(model.parameters(), { lr: 3e-3 });
  const rng = new Random(seed + 1), B = 4;
  const losses: number[] = [];
  for (let s = 0; s < steps; s++) {
    const images = Tensor.from(rng.normalArray(B * 16 * 16, 1), [B, 1, 16, 16]);
    const labels = Tensor.from(Int32Array.from({ length: B }, () => rng.u32() % 4), [B]);
    losses.push(await trainStepAsync(model, opt, images, labels));
  }
  model.eval();
  const logits = model.forward(Tensor.from(rng.normalArray(B * 16 * 16, 1), [B, 1, 16, 16]));
  const result = { losses, logits: Array.from(logits.toArray()) };
  model.dispose();
  opt.dispose();
  return result;
}

if (!isMainThread && parentPort) {
  const { seed, steps } = workerData as { seed: number; steps: number };
  void runTask(seed, steps).then((r) => parentPort!.postMessage(r));
}
