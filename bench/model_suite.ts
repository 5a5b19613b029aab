/**
 * The model benchmarks: for each model, our inference against onnxruntime-node and PyTorch 2.x
 * (eager, torch.inference_mode()), our inference at precision 'int8' against onnxruntime-node on
 * onnxruntime's own quantize_dynamic(QInt8) of the same export, and our training step against PyTorch's, every one in its own
 * process, ours and each peer in each of its thread-waiting variants (variants.ts), on the weights and inputs that a `prepare` worker saved from our model (so every side
 * runs identical weights on identical inputs), ours and the peers alternating over --rounds.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

import { failureReason, lastEvent, runWorker, type ChildResult } from './child';
import type { Options } from './cli';
import { forwardFlops, trainFlops } from './flops';
import { exportInputs, hashOf, runScript, type PythonInfo } from './peers';
import type { Repeat } from './protocol';
import {
  fastestVariant, missing, modeName, outcomeOf, pooled, type Agreement, type Missing, type Mode, type ModelResult, type Outcome, type PeerName,
  type PeerResult,
} from './results';
import type { StepBreakdown } from './step_breakdown';
import { archKey, itemsPerStep, unit, type ModelSpec } from './specs';
import { ORT_VARIANTS, OURS_VARIANTS, TORCH_VARIANTS } from './variants';

export interface SuiteContext {
  opts: Options;
  python: PythonInfo;
  /** Progress lines (stderr). */
  log: (line: string) => void;
}

interface Files {
  weights: string;
  inputs: string;
  /** Our last inference logits (raw float32), which the peers compare theirs with. */
  logits: string;
}

const preparedArchs = new Set<string>();
/**
 * Setup (weights, inputs, the ONNX export) is not measured and may be slow on a busy machine: the
 * export of ViT-B/16 takes minutes there. It runs once per architecture (the export is cached).
 */
const SETUP_TIMEOUT_S = 600;

function repeatOf(o: Options): Repeat {
  return { warmup: o.warmup, reps: o.reps, budget: o.budget };
}

/** Writes the weights (once per architecture) and this batch's inputs; the reason when that failed. */
export async function prepareFiles(spec: ModelSpec, ctx: SuiteContext): Promise<Files | string> {
  const dir = ctx.opts.cacheDir, key = archKey(spec.arch);
  const files = {
    weights: path.join(dir, `${key}.weights.safetensors`),
    inputs: path.join(dir, `${spec.id}-b${spec.batch}.inputs.safetensors`),
    logits: path.join(dir, `${spec.id}-b${spec.batch}.ours.logits.f32`),
  };
  fs.rmSync(files.logits, { force: true });
  const r = await runWorker({ task: 'prepare', spec, weightsPath: preparedArchs.has(key) ? '' : files.weights, inputsPath: files.inputs },
    { timeoutS: SETUP_TIMEOUT_S });
  if (!lastEvent(r, 'result')) return `preparing the weights and inputs failed: ${failureReason(r)}`;
  preparedArchs.add(key);
  return files;
}

/**
 * The ONNX export of the model with these weights (and, when this run measures int8, onnxruntime's
 * quantize_dynamic(QInt8) of it beside it, `.int8.onnx`), reused while the weights, export scripts and
 * PyTorch are unchanged. Returns the file `mode` runs.
 */
async function onnxExport(spec: ModelSpec, files: Files, mode: Mode, ctx: SuiteContext): Promise<string | Missing> {
  const base = path.join(ctx.opts.cacheDir, archKey(spec.arch)), onnx = `${base}.onnx`, int8 = `${base}.int8.onnx`, keyFile = `${onnx}.key`;
  const withInt8 = ctx.opts.modes.includes('int8');
  const key = hashOf([files.weights, ...exportInputs()], [ctx.python.torch ?? '', withInt8 ? 'int8' : '']);
  const want = mode === 'int8' ? int8 : onnx;
  if (fs.existsSync(want) && fs.existsSync(keyFile) && fs.readFileSync(keyFile, 'utf8') === key) return want;
  ctx.log(`  exporting ${spec.id} to ONNX with PyTorch${withInt8 ? ' (and quantizing it with onnxruntime\'s quantize_dynamic)' : ''} ...`);
  const r = await runScript('export_onnx.py', ['--arch', JSON.stringify(spec.arch), '--weights', files.weights,
    '--inputs', files.inputs, '--out', onnx, '--threads', String(ctx.opts.threads), ...(withInt8 ? ['--int8-out', int8] : [])],
  ctx.opts.threads, { timeoutS: SETUP_TIMEOUT_S });
  if (!lastEvent(r, 'result')) return missing('failed', `ONNX export failed: ${failureReason(r)}`);
  fs.writeFileSync(keyFile, key);
  return want;
}

function describe(o: Outcome, items: number, u: string): string {
  if (o.status !== 'ok') return `${o.status}: ${o.reason}`;
  return `${(items / o.medianSeconds).toFixed(1)} ${u} (${o.samples.length} timed run(s)${o.note ? `; ${o.note}` : ''})`;
}

function peerResult(name: PeerName, variant: string, r: ChildResult | Missing, agreement: Agreement | null = null): PeerResult {
  return { name, variant, outcome: 'status' in r ? r : outcomeOf(r), agreement };
}

/** onnxruntime-node on the ONNX export (its int8 quantization for mode 'int8') in each variant, compared with our logits when ours ran. */
async function ort(spec: ModelSpec, files: Files, mode: Mode, oursRan: boolean, ctx: SuiteContext): Promise<PeerResult[]> {
  const o = ctx.opts, all = (m: Missing) => ORT_VARIANTS.map((v) => peerResult('onnxruntime-node', v.label, m));
  if (!ctx.python.torch) return all(missing('unavailable', `no ONNX export without PyTorch (${ctx.python.reason})`));
  const onnx = await onnxExport(spec, files, mode, ctx);
  if (typeof onnx !== 'string') return all(onnx);
  const out: PeerResult[] = [];
  for (const v of ORT_VARIANTS) {
    const r = await runWorker({ task: 'ort', arch: spec.arch, onnxPath: onnx, inputsPath: files.inputs, spinning: v.spinning,
      logitsPath: oursRan ? files.logits : null, threads: o.threads, repeat: repeatOf(o) }, { timeoutS: o.timeout });
    out.push(peerResult('onnxruntime-node', v.label, r, (lastEvent(r, 'result')?.agreement as Agreement | null | undefined) ?? null));
  }
  return out;
}

/** PyTorch eager (scripts/torch_bench.py) in each variant: inference compared with our logits, training with our first-step loss. */
async function torch(spec: ModelSpec, files: Files, mode: 'infer' | 'train', oursRun: ChildResult, ctx: SuiteContext): Promise<PeerResult[]> {
  const o = ctx.opts;
  if (!ctx.python.torch) return TORCH_VARIANTS.map((v) => peerResult('PyTorch', v.label, missing('unavailable', ctx.python.reason ?? '')));
  const oursResult = lastEvent(oursRun, 'result');
  const args = ['--mode', mode, '--arch', JSON.stringify(spec.arch), '--weights', files.weights, '--inputs', files.inputs,
    ...(mode === 'infer' && oursResult ? ['--ours-logits', files.logits] : []), '--threads', String(o.threads),
    '--warmup', String(o.warmup), '--reps', String(o.reps), '--budget', String(o.budget)];
  const out: PeerResult[] = [];
  for (const v of TORCH_VARIANTS) {
    const r = await runScript('torch_bench.py', args, o.threads, { timeoutS: o.timeout, variant: v });
    const result = lastEvent(r, 'result'), oursLoss = oursResult?.firstLoss, peerLoss = result?.firstLoss;
    out.push(peerResult('PyTorch', v.label, r, mode === 'infer' ? (result?.agreement as Agreement | null | undefined) ?? null
      : typeof oursLoss === 'number' && typeof peerLoss === 'number' ? { oursLoss, peerLoss } : null));
  }
  return out;
}

/** One round of one mode: ours in each of its variants, then each requested peer in each of its variants. */
async function round(spec: ModelSpec, files: Files, mode: Mode, ctx: SuiteContext): Promise<ModelResult> {
  const o = ctx.opts, tag = `[${spec.id} b${spec.batch} ${modeName(mode)}]`, items = itemsPerStep(spec), u = unit(spec);
  const oursRuns: ChildResult[] = [], oursVariants: { variant: string; outcome: Outcome }[] = [];
  for (const v of OURS_VARIANTS) {
    const r = await runWorker({ task: 'ours', spec, mode, weightsPath: files.weights, inputsPath: files.inputs,
      logitsPath: mode !== 'train' ? files.logits : null, threads: o.threads, spinUs: v.spinUs, repeat: repeatOf(o) }, { timeoutS: o.timeout });
    oursRuns.push(r);
    oursVariants.push({ variant: v.label, outcome: outcomeOf(r) });
    ctx.log(`${tag} ours (${v.label}): ${describe(oursVariants[oursVariants.length - 1].outcome, items, u)}`);
  }
  // The first variant (our default) answers for the breakdown and the peers' agreement checks.
  const [oursRun] = oursRuns, ours = fastestVariant(oursVariants)!.outcome;
  const peers: PeerResult[] = [];
  if (mode !== 'train' && o.peers.includes('ort')) peers.push(...(await ort(spec, files, mode, ours.status === 'ok', ctx)));
  if (mode !== 'int8' && o.peers.includes('torch')) peers.push(...(await torch(spec, files, mode, oursRun, ctx)));
  for (const p of peers) ctx.log(`${tag} ${p.name} (${p.variant}): ${describe(p.outcome, items, u)}`);
  const breakdown = (lastEvent(oursRun, 'result')?.breakdown as StepBreakdown | undefined) ?? null;
  return { ...row(spec, mode, ours, peers, breakdown), oursVariants };
}

function row(spec: ModelSpec, mode: Mode, ours: Outcome, peers: PeerResult[], breakdown: StepBreakdown | null = null): ModelResult {
  return { model: spec.id, title: spec.title, batch: spec.batch, mode, unit: unit(spec), items: itemsPerStep(spec),
    flops: mode === 'train' ? trainFlops(spec) : forwardFlops(spec), ours, peers, breakdown };
}

/** Every requested mode of one model, each in --rounds rounds pooled. */
export async function runModel(spec: ModelSpec, ctx: SuiteContext): Promise<ModelResult[]> {
  fs.mkdirSync(ctx.opts.cacheDir, { recursive: true });
  const files = await prepareFiles(spec, ctx);
  const out: ModelResult[] = [];
  for (const mode of ctx.opts.modes) {
    if (typeof files === 'string') {
      out.push(row(spec, mode, missing('failed', files), []));
      ctx.log(`[${spec.id}] ${files}`);
      continue;
    }
    const rounds: ModelResult[] = [];
    for (let r = 0; r < ctx.opts.rounds; r++) rounds.push(await round(spec, files, mode, ctx));
    out.push(pooled(rounds));
  }
  return out;
}
