/**
 * Repeats one benchmark step (bench/workloads.ts) of one model, for a profiler to watch:
 * scripts/profile.sh runs it under `perf record`. Prints the median step time to stderr, then two
 * more steps op by op (step_breakdown.ts: the native ops' time, and what is left outside them).
 *
 *   tsx bench/profile_step.ts <model id> <infer|int8|bf16|train|train-bf16> [steps = 20] [threads = 2]
 * (int8, bf16: inference at that precision; train-bf16: a training step at precision 'bf16').
 */
import { native } from '../lib';
import { MODELS } from './specs';
import { stepBreakdown } from './step_breakdown';
import { buildModel, inferenceStep, makeInputs, trainingStep } from './workloads';

const [id = '', mode = '', stepsArg = '20', threadsArg = '2'] = process.argv.slice(2);
const spec = MODELS.find((m) => m.id === id);
const MODES = { infer: 'fp32', int8: 'int8', bf16: 'bf16', train: 'fp32', 'train-bf16': 'bf16' } as const;
if (!spec || !(mode in MODES)) {
  process.stderr.write(`usage: profile_step.ts <${MODELS.map((m) => m.id).join('|')}> <${Object.keys(MODES).join('|')}> [steps] [threads]\n`);
  process.exit(2);
}
native.setNumThreads(Number(threadsArg));
const model = buildModel(spec.arch), x = makeInputs(spec);
const inputs = { images: x.images, src: x.src, tgt: x.tgt, labels: x.labels };
const precision = MODES[mode as keyof typeof MODES];
const step: () => void = !mode.startsWith('train')
  ? ((run) => () => run().dispose())(inferenceStep(model, inputs, precision))
  : ((run) => () => void run())(trainingStep(model, inputs, precision));
step();  // warm-up: first-touch of memory, the allocator's cache
const ms: number[] = [];
for (let i = 0; i < Number(stepsArg); i++) {
  const t0 = performance.now();
  step();
  ms.push(performance.now() - t0);
}
ms.sort((a, b) => a - b);
process.stderr.write(`${id} ${mode}: median ${ms[ms.length >> 1].toFixed(1)} ms per step over ${ms.length} steps\n`);
void stepBreakdown(step, 2).then((b) => {
  const inOps = b.ops.reduce((a, o) => a + o.ms, 0);
  process.stderr.write(`op by op: step ${b.stepMs.toFixed(1)} ms, in native ops ${inOps.toFixed(1)} ms, outside them ${(b.stepMs - inOps).toFixed(1)} ms\n`);
  for (const o of b.ops) process.stderr.write(`  ${o.op.padEnd(28)} ${o.ms.toFixed(2).padStart(9)} ms  ${o.calls} call(s)\n`);
});
