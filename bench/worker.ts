/**
 * One measurement in a fresh process (started by child.ts runWorker): reads the request from
 * argv[2], answers in JSON lines on stdout (protocol.ts). Nothing else may print to stdout here.
 */
import * as fs from 'node:fs';

import { native } from '../lib';
import { measureOp } from './op_measure';
import { compareLogits, loadOrt, ortSession } from './ort';
import type { OrtRequest, OursRequest, WorkerRequest } from './protocol';
import { repeat } from './sampling';
import { stepBreakdown } from './step_breakdown';
import { inferenceStep, loadInputs, loadModel, prepare, trainingStep } from './workloads';

function emit(event: string, fields: Record<string, unknown> = {}): void {
  process.stdout.write(`${JSON.stringify({ event, ...fields })}\n`);
}

const maxRssKb = () => process.resourceUsage().maxRSS;
const onRun = (seconds: number, warmup: boolean) => emit('sample', { seconds, warmup });

/** Sets the threads (and how they wait); `ready` follows when the measurement's setup is done (a time-out's lower bound counts from it). */
function setup(threads: number, spinUs = 0): void {
  native.setNumThreads(threads);
  native.setThreadSpin(spinUs);
}

/** Extra, untimed runs of our step with its native ops timed (step_breakdown.ts), after the timed runs. */
const BREAKDOWN_RUNS = 3;

const ready = () => emit('ready', { threads: native.numThreads(), isa: native.isaInfo().active });

async function ours(q: OursRequest): Promise<void> {
  setup(q.threads, q.spinUs);
  const model = loadModel(q.spec.arch, q.weightsPath), x = loadInputs(q.inputsPath);
  const precision = q.precision ?? (q.mode === 'int8' ? 'int8' : 'fp32');
  ready();
  if (q.mode !== 'train') {
    const step = inferenceStep(model, x, precision), kept: { logits: Float32Array } = { logits: new Float32Array(0) };
    await repeat(() => {
      const logits = step();
      kept.logits = logits.toArray();
      logits.dispose();
    }, q.repeat, onRun);
    if (q.logitsPath) fs.writeFileSync(q.logitsPath, new Uint8Array(kept.logits.buffer));
    const breakdown = await stepBreakdown(() => step().dispose(), BREAKDOWN_RUNS);
    emit('result', { maxRssKb: maxRssKb(), breakdown });
  } else {
    const step = trainingStep(model, x, precision), losses: number[] = [];
    await repeat(() => losses.push(step()), q.repeat, onRun);
    const breakdown = await stepBreakdown(step, BREAKDOWN_RUNS);
    emit('result', { maxRssKb: maxRssKb(), firstLoss: losses[0], breakdown });
  }
}

async function ort(q: OrtRequest): Promise<void> {
  const loaded = loadOrt();
  if ('reason' in loaded) return emit('unavailable', { reason: loaded.reason });
  const session = await ortSession(loaded.ort, q.arch, q.onnxPath, q.inputsPath, q.threads, q.spinning);
  emit('ready', { threads: q.threads, version: session.version });
  const kept: { logits: Float32Array } = { logits: new Float32Array(0) };
  await repeat(async () => {
    kept.logits = await session.run();
  }, q.repeat, onRun);
  const agreement = q.logitsPath ? compareLogits(q.logitsPath, kept.logits) : null;
  emit('result', { maxRssKb: maxRssKb(), agreement });
}

async function main(q: WorkerRequest): Promise<void> {
  switch (q.task) {
    case 'prepare':
      prepare(q.spec, q.weightsPath, q.inputsPath);
      return emit('result', { maxRssKb: maxRssKb() });
    case 'ours':
      return ours(q);
    case 'ort':
      return ort(q);
    case 'peak': {
      native.setNumThreads(q.threads);
      const active = native.isaInfo().active;  // the ISA every other measurement runs on
      const peaks = native.isaInfo().available.map((isa) => {
        native.setIsa(isa);
        const out = new Float64Array(3);
        native.fmaPeak({ minSeconds: q.minSeconds, out });
        return { isa, gflops: out[0] / out[1] / 1e9, threads: out[2] };
      });
      native.setIsa(active);
      return emit('result', { peaks, isa: active, bf16Kernels: native.isaInfo().bf16Kernels });
    }
    case 'ops':
      setup(q.threads);
      ready();
      for (const [index, c] of q.cases.entries()) emit('case', { index, passes: await measureOp(c, q.repeat) });
      return emit('result', { maxRssKb: maxRssKb() });
  }
}

main(JSON.parse(process.argv[2] ?? '{}') as WorkerRequest).catch((e: Error) => {
  emit('error', { message: `${e.message}`.split('\n')[0] });
  process.exitCode = 1;
});
