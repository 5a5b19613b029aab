/**
 * The event loop stays responsive while a model trains through the asynchronous API: the p99
 * event-loop delay (perf_hooks.monitorEventLoopDelay) stays under 20 ms although one synchronous
 * training step of the model takes well over that.
 */
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';

import { describe, expect, it } from 'vitest';

import { AdamW, Tensor, trainStep, trainStepAsync, ViTClassifier } from '../lib';
import { Random } from '../lib/core/random';

describe('event loop', () => {
  it('p99 delay under 20 ms while trainStepAsync runs a model whose synchronous step takes > 20 ms', async () => {
    const model = new ViTClassifier({ imgSize: 32, patchSize: 4, inChannels: 3, numClasses: 10, dModel: 128, numHeads: 4, dFF: 512, depth: 4, seed: 1 });
    const opt = new AdamW(model.parameters(), { lr: 1e-4 });
    const rng = new Random(2), B = 16;
    const images = Tensor.from(rng.normalArray(B * 3 * 32 * 32, 1), [B, 3, 32, 32]);
    const labels = Tensor.from(Int32Array.from({ length: B }, (_, i) => i % 10), [B]);

    trainStep(model, opt, images, labels);
    let t0 = performance.now();
    const syncSteps = 3;
    for (let i = 0; i < syncSteps; i++) trainStep(model, opt, images, labels);
    const syncMs = (performance.now() - t0) / syncSteps;

    const steps = Math.max(8, Math.ceil(1500 / syncMs));
    const delay = monitorEventLoopDelay({ resolution: 1 });
    delay.enable();
    t0 = performance.now();
    for (let i = 0; i < steps; i++) await trainStepAsync(model, opt, images, labels);
    const asyncMs = (performance.now() - t0) / steps;
    delay.disable();
    const ms = (ns: number) => ns / 1e6;
    const p99 = ms(delay.percentile(99));
    console.log(`event loop while training (${steps} async steps): p50 ${ms(delay.percentile(50)).toFixed(2)} ms, ` +
      `p99 ${p99.toFixed(2)} ms, max ${ms(delay.max).toFixed(2)} ms; step: synchronous ${syncMs.toFixed(1)} ms, ` +
      `asynchronous ${asyncMs.toFixed(1)} ms`);
    expect(syncMs).toBeGreaterThan(20);
    expect(p99).toBeLessThan(20);
  });
});
