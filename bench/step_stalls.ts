/**
 * Event-loop stalls and native calls of one training step (issue 12: zeroGrad filled every
 * gradient in JS on the main thread and AdamW was one native call per parameter tensor).
 * Trains a ViT with trainStepAsync while a 1 ms timer measures the event loop's delay
 * (perf_hooks.monitorEventLoopDelay), and counts the native calls of one step.
 *
 *   npx tsx bench/step_stalls.ts [--config vit-b16|vit-s16] [--steps N] [--batch N]
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { parseArgs } from 'node:util';

import { AdamW, Tensor, trainStepAsync, ViTClassifier, type ViTClassifierConfig } from '../lib';
import { opsCalledListAsync } from '../test/support/ops_called';

const CONFIGS: Record<string, ViTClassifierConfig> = {
  'vit-b16': { imgSize: 224, patchSize: 16, inChannels: 3, dModel: 768, numHeads: 12, dFF: 3072, depth: 12, numClasses: 1000, eps: 1e-6 },
  'vit-s16': { imgSize: 224, patchSize: 16, inChannels: 3, dModel: 384, numHeads: 6, dFF: 1536, depth: 12, numClasses: 1000, eps: 1e-6 },
};

async function main(): Promise<void> {
  const { values: v } = parseArgs({ options: { config: { type: 'string' }, steps: { type: 'string' }, batch: { type: 'string' } } });
  const config = CONFIGS[v.config ?? 'vit-s16'];
  if (!config) throw new Error(`Expected --config ${Object.keys(CONFIGS).join(' | ')}`);
  const steps = Number(v.steps ?? 5), batch = Number(v.batch ?? 2);
  const model = new ViTClassifier(config);
  const opt = new AdamW(model.parameters());
  const params = model.parameters().reduce((n, p) => n + p.size, 0);
  const x = Tensor.zeros([batch, 3, 224, 224]), y = Tensor.zeros([batch], 'int32');
  await trainStepAsync(model, opt, x, y); // warm-up: gradients and optimizer state exist from here on
  const calls = await opsCalledListAsync(() => trainStepAsync(model, opt, x, y));
  const h = monitorEventLoopDelay({ resolution: 1 });
  const timer = setInterval(() => {}, 1);
  h.enable();
  const t0 = performance.now();
  for (let s = 0; s < steps; s++) await trainStepAsync(model, opt, x, y);
  const ms = (performance.now() - t0) / steps;
  h.disable();
  clearInterval(timer);
  const per = (op: string) => calls.filter((c) => c === op).length;
  console.log(`${v.config ?? 'vit-s16'}: ${(params / 1e6).toFixed(1)}M parameters, ${model.parameters().length} tensors, batch ${batch}, ` +
    `${ms.toFixed(0)} ms per step`);
  console.log(`native calls per step: ${calls.length} (zero ${per('zero')}, adamwStep ${per('adamwStep')})`);
  console.log(`event-loop delay during ${steps} steps: p50 ${(h.percentile(50) / 1e6).toFixed(2)} ms, p99 ${(h.percentile(99) / 1e6).toFixed(2)} ms, ` +
    `max ${(h.max / 1e6).toFixed(2)} ms`);
}

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 1;
});
