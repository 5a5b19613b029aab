/**
 * The bf16 rows of the model benchmarks (issue 25): our inference and training step at precision
 * 'bf16' against the same step at 'fp32' (our default), and PyTorch 2.x eager under
 * torch.autocast('cpu', dtype=torch.bfloat16) (scripts/torch_bench.py --autocast bf16), on the same
 * weights and inputs as the fp32 rows (model_suite.ts prepares them). Ours runs with its threads
 * sleeping (our default), PyTorch in each of its thread-waiting variants (variants.ts), the faster
 * standing for it; the three alternate over --rounds and their timed runs are pooled. The target:
 * bf16 ≥ 1.6× our fp32 on a CPU with avx512_bf16 (ours then runs vdpbf16ps; elsewhere it emulates
 * the rounding with fp32 FMA and is slower than fp32).
 */
import { runWorker, type ChildResult } from './child';
import { prepareFiles, type SuiteContext } from './model_suite';
import { runScript } from './peers';
import { fastestVariant, missing, outcomeOf, pool, seconds, type Outcome } from './results';
import { itemsPerStep, unit, type ModelSpec } from './specs';
import { OURS_VARIANTS, TORCH_VARIANTS } from './variants';

export interface Bf16Row {
  model: string;
  batch: number;
  mode: 'infer' | 'train';
  unit: 'img/s' | 'tok/s';
  items: number;
  /** Ours at 'fp32' and at 'bf16' (threads sleeping). */
  fp32: Outcome;
  bf16: Outcome;
  /** PyTorch under torch.autocast bf16, its faster variant. */
  torchBf16: Outcome;
}

/** The target of issue 25: ours at bf16 over ours at fp32. */
export const BF16_GOAL = 1.6;

/** ours bf16 ÷ ours fp32 as a speed ratio (fp32 median time ÷ bf16's), or null. */
export function bf16Speedup(r: Bf16Row): number | null {
  const a = seconds(r.fp32), b = seconds(r.bf16);
  return a && b ? a / b : null;
}

function ours(spec: ModelSpec, files: { weights: string; inputs: string }, mode: 'infer' | 'train', precision: 'fp32' | 'bf16',
  ctx: SuiteContext): Promise<ChildResult> {
  const o = ctx.opts;
  return runWorker({ task: 'ours', spec, mode, weightsPath: files.weights, inputsPath: files.inputs, logitsPath: null, threads: o.threads,
    spinUs: OURS_VARIANTS[0].spinUs, repeat: { warmup: o.warmup, reps: o.reps, budget: o.budget }, precision }, { timeoutS: o.timeout });
}

async function torchBf16(spec: ModelSpec, files: { weights: string; inputs: string }, mode: 'infer' | 'train', ctx: SuiteContext): Promise<Outcome> {
  const o = ctx.opts;
  if (!o.peers.includes('torch')) return missing('unavailable', 'not requested');
  if (!ctx.python.torch) return missing('unavailable', ctx.python.reason ?? '');
  const args = ['--mode', mode, '--arch', JSON.stringify(spec.arch), '--weights', files.weights, '--inputs', files.inputs, '--autocast', 'bf16',
    '--threads', String(o.threads), '--warmup', String(o.warmup), '--reps', String(o.reps), '--budget', String(o.budget)];
  const variants = [];
  for (const v of TORCH_VARIANTS) variants.push({ outcome: outcomeOf(await runScript('torch_bench.py', args, o.threads, { timeoutS: o.timeout, variant: v })) });
  return fastestVariant(variants)!.outcome;
}

/**
 * The bf16 rows of one model, each requested mode but 'int8' (int8 inference has its own rows) in
 * --rounds rounds (ours fp32, ours bf16, PyTorch bf16 alternating).
 */
export async function runBf16(spec: ModelSpec, ctx: SuiteContext): Promise<Bf16Row[]> {
  const files = await prepareFiles(spec, ctx), rows: Bf16Row[] = [];
  for (const mode of ctx.opts.modes.filter((m) => m !== 'int8')) {
    const base = { model: spec.id, batch: spec.batch, mode, unit: unit(spec), items: itemsPerStep(spec) };
    if (typeof files === 'string') {
      const m = missing('failed', files);
      rows.push({ ...base, fp32: m, bf16: m, torchBf16: m });
      continue;
    }
    const runs: Record<'fp32' | 'bf16' | 'torchBf16', Outcome[]> = { fp32: [], bf16: [], torchBf16: [] };
    for (let r = 0; r < ctx.opts.rounds; r++) {
      runs.fp32.push(outcomeOf(await ours(spec, files, mode, 'fp32', ctx)));
      runs.bf16.push(outcomeOf(await ours(spec, files, mode, 'bf16', ctx)));
      runs.torchBf16.push(await torchBf16(spec, files, mode, ctx));
    }
    const row = { ...base, fp32: pool(runs.fp32), bf16: pool(runs.bf16), torchBf16: pool(runs.torchBf16) };
    const rate = (o: Outcome) => (seconds(o) ? `${(row.items / seconds(o)!).toFixed(1)} ${row.unit}` : o.status);
    ctx.log(`[${spec.id} b${spec.batch} ${mode} bf16] ours fp32 ${rate(row.fp32)}, ours bf16 ${rate(row.bf16)}, PyTorch autocast bf16 ${rate(row.torchBf16)}`);
    rows.push(row);
  }
  return rows;
}
