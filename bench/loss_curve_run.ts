/**
 * The loss-curve check on any device, with PyTorch's own curves beside ours:
 *
 *   npm run bench:curve -- [--device cpu|cuda] [--steps 300] [--threads 2] [--no-torch] [--dir DIR]
 *
 * Trains the seed-cifar model (batch 64) `steps` AdamW steps at fp32 and at bf16 from the same
 * start on the same batches (bench/loss_curve.ts), then, unless --no-torch, PyTorch's ViT with the
 * same starting weights on the same batches at fp32 and under torch.autocast(bfloat16)
 * (bench/gpu/torch_curve.py, run by NF_BENCH_PYTHON or the project's .venv-bench: `npm run
 * bench:setup`), and prints the worst windowed difference of each pair beside the 2% limit of
 * issue 22's check. DIR (default: a temporary folder) keeps the starting weights and the curves.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parseArgs } from 'node:util';

import { native, type Device } from '../lib/index';
import { curveComparisons, CURVE_LIMIT, patternBatch, trainCurve, writeCurveFiles } from './loss_curve';
import { MODELS, type ViTArch } from './specs';

const USAGE = 'usage: npm run bench:curve -- [--device cpu|cuda] [--steps N] [--threads N] [--no-torch] [--dir DIR]';
function options() {
  const { values } = parseArgs({ options: {
    device: { type: 'string', default: 'cpu' }, steps: { type: 'string', default: '300' }, 'no-torch': { type: 'boolean', default: false },
    dir: { type: 'string' }, threads: { type: 'string', default: '2' },
  } });
  const device = values.device as Device, steps = Number(values.steps), threads = Number(values.threads);
  if (device !== 'cpu' && device !== 'cuda') throw new Error(`Expected cpu or cuda for --device but received ${values.device}`);
  if (!Number.isInteger(steps) || steps < 1) throw new Error(`Expected a positive integer for --steps but received ${values.steps}`);
  if (!Number.isInteger(threads) || threads < 1) throw new Error(`Expected a positive integer for --threads but received ${values.threads}`);
  return { ...values, device, steps, threads };
}
let values: ReturnType<typeof options>;
try {
  values = options();
} catch (e) {
  console.error(`bench:curve: ${(e as Error).message}\n${USAGE}`);
  process.exit(2);
}
const { device, steps } = values;
native.setNumThreads(values.threads);

const arch = MODELS.find((m) => m.id === 'seed-cifar')!.arch as ViTArch, B = 64;
const batches = Array.from({ length: steps }, (_, k) => patternBatch(arch, B, k));
const ours: { fp32: number[]; bf16: number[] } = { fp32: [], bf16: [] };
for (const precision of ['fp32', 'bf16'] as const) {
  const t0 = performance.now();
  ours[precision] = trainCurve(arch, batches, precision, device);
  console.log(`ours ${precision} on ${device} (${native.isaInfo().active}): loss ${ours[precision][0].toFixed(4)} → ` +
    `${ours[precision][steps - 1].toFixed(4)} in ${((performance.now() - t0) / 1e3).toFixed(1)} s`);
}
const dir = values.dir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'nf-curve-'));
writeCurveFiles(dir, arch, batches, ours);

let torch: { fp32: number[]; bf16: number[]; torch: string } | undefined;
if (!values['no-torch']) {
  const python = process.env.NF_BENCH_PYTHON ?? path.join(__dirname, '..', '.venv-bench', 'bin', 'python');
  const run = spawnSync(python, [path.join(__dirname, 'gpu', 'torch_curve.py'), dir, '--device', device, '--threads', String(values.threads)],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  if (run.status !== 0) console.log(`PyTorch's curves: not run (${run.error?.message ?? `${python} exited ${run.status}`}; npm run bench:setup)`);
  else torch = JSON.parse(run.stdout.trim().split('\n').at(-1)!);
  if (torch) console.log(`PyTorch ${torch.torch} on ${device}: fp32 loss ${torch.fp32[0].toFixed(4)} → ${torch.fp32[steps - 1].toFixed(4)}, ` +
    `autocast bf16 ${torch.bf16[0].toFixed(4)} → ${torch.bf16[steps - 1].toFixed(4)}`);
}
console.log(`\nseed-cifar, batch ${B}, ${steps} steps, windows of 20 (issue 22's limit: ${100 * CURVE_LIMIT}% for ours bf16 vs fp32)\n`);
console.log('| curves | worst window | every window |\n| --- | --- | --- |');
for (const c of curveComparisons(ours, torch))
  console.log(`| ${c.what} | ${(100 * c.worst).toFixed(2)}% | ${c.windows.map((w) => (100 * w).toFixed(1)).join(' ')} |`);
console.log(`\n(starting weights and curves in ${dir})`);
