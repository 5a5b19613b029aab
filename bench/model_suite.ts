/**
 * The model benchmarks: for each model, our inference against onnxruntime-node and our training
 * step against PyTorch, every one in its own process, on the weights and inputs that a `prepare`
 * worker saved from our model (so all three run identical weights on identical inputs).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

import { eventsOf, failureReason, lastEvent, runWorker, type ChildResult } from './child';
import type { Options } from './cli';
import { forwardFlops, trainFlops } from './flops';
import { exportInputs, hashFiles, pythonEnv, runScript, type PythonInfo } from './peers';
import type { Repeat } from './protocol';
import { missing, outcomeOf, pooled, type Missing, type ModelResult, type Outcome, type PeerInfo } from './results';
import { archKey, itemsPerStep, unit, type ModelSpec } from './specs';

export interface SuiteContext {
  opts: Options;
  python: PythonInfo;
  openblas: string | null;
  /** Progress lines (stderr). */
  log: (line: string) => void;
}

interface Files {
  weights: string;
  inputs: string;
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
async function prepareFiles(spec: ModelSpec, ctx: SuiteContext): Promise<Files | string> {
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

/** The ONNX export of the model with these weights, reused while the weights and export scripts are unchanged. */
async function onnxExport(spec: ModelSpec, files: Files, ctx: SuiteContext): Promise<string | Missing> {
  const onnx = path.join(ctx.opts.cacheDir, `${archKey(spec.arch)}.onnx`), keyFile = `${onnx}.key`;
  const key = hashFiles([files.weights, ...exportInputs()]);
  if (fs.existsSync(onnx) && fs.existsSync(keyFile) && fs.readFileSync(keyFile, 'utf8') === key) return onnx;
  ctx.log(`  exporting ${spec.id} to ONNX with PyTorch ...`);
  const r = await runScript('export_onnx.py', ['--arch', JSON.stringify(spec.arch), '--weights', files.weights,
    '--inputs', files.inputs, '--out', onnx], { timeoutS: SETUP_TIMEOUT_S, env: pythonEnv(ctx.opts.threads, ctx.openblas) });
  if (!lastEvent(r, 'result')) return missing('failed', `ONNX export failed: ${failureReason(r)}`);
  fs.writeFileSync(keyFile, key);
  return onnx;
}

function describe(o: Outcome, items: number, u: string): string {
  if (o.status !== 'ok') return `${o.status}: ${o.reason}`;
  return `${(items / o.medianSeconds).toFixed(1)} ${u} (${o.samples.length} timed run(s)${o.note ? `; ${o.note}` : ''})`;
}

async function inference(spec: ModelSpec, files: Files, ctx: SuiteContext): Promise<ModelResult> {
  const o = ctx.opts, tag = `[${spec.id} b${spec.batch} infer]`;
  const oursRun = await runWorker({ task: 'ours', spec, mode: 'infer', weightsPath: files.weights, inputsPath: files.inputs,
    logitsPath: files.logits, threads: o.threads, repeat: repeatOf(o) }, { timeoutS: o.timeout });
  const ours = outcomeOf(oursRun);
  ctx.log(`${tag} ours: ${describe(ours, itemsPerStep(spec), unit(spec))}`);
  let peer: (PeerInfo & { outcome: Outcome }) | null = null, agreement: ModelResult['agreement'] = null;
  if (o.peers.includes('ort')) {
    peer = { name: 'onnxruntime-node', detail: '', outcome: missing('unavailable', '') };
    const onnx = ctx.python.torch ? await onnxExport(spec, files, ctx)
      : missing('unavailable', `no ONNX export without PyTorch (${ctx.python.reason})`);
    if (typeof onnx !== 'string') {
      peer.outcome = onnx;
    } else {
      const r = await runWorker({ task: 'ort', arch: spec.arch, onnxPath: onnx, inputsPath: files.inputs,
        logitsPath: ours.status === 'ok' ? files.logits : null, threads: o.threads, repeat: repeatOf(o) }, { timeoutS: o.timeout });
      peer.outcome = outcomeOf(r);
      const ready = lastEvent(r, 'ready');
      peer.detail = ready ? `${ready.version}, ${o.threads} intra-op threads, graph optimisations all` : '';
      agreement = (lastEvent(r, 'result')?.agreement as ModelResult['agreement']) ?? null;
    }
    ctx.log(`${tag} onnxruntime-node: ${describe(peer.outcome, itemsPerStep(spec), unit(spec))}`);
  }
  return row(spec, 'infer', ours, peer, agreement);
}

function torchDetail(r: ChildResult, openblas: string | null): string {
  const ready = lastEvent(r, 'ready');
  if (!ready) return '';
  const blas = ready.blas as { kind: string; path: string | null };
  const how = blas.kind === 'openblas' && openblas ? ' (preloaded)' : blas.kind === 'reference' ? ': netlib reference BLAS, not representative' : '';
  return `${ready.torch}, ${ready.threads} threads, BLAS ${blas.kind}${how}`;
}

async function training(spec: ModelSpec, files: Files, ctx: SuiteContext): Promise<ModelResult> {
  const o = ctx.opts, tag = `[${spec.id} b${spec.batch} train]`;
  const oursRun = await runWorker({ task: 'ours', spec, mode: 'train', weightsPath: files.weights, inputsPath: files.inputs,
    logitsPath: null, threads: o.threads, repeat: repeatOf(o) }, { timeoutS: o.timeout });
  const ours = outcomeOf(oursRun);
  ctx.log(`${tag} ours: ${describe(ours, itemsPerStep(spec), unit(spec))}`);
  let peer: (PeerInfo & { outcome: Outcome }) | null = null, agreement: ModelResult['agreement'] = null;
  if (o.peers.includes('torch')) {
    peer = { name: 'PyTorch', detail: '', outcome: missing('unavailable', ctx.python.reason ?? '') };
    if (ctx.python.torch) {
      const r = await runScript('torch_train_bench.py', ['--arch', JSON.stringify(spec.arch), '--weights', files.weights,
        '--inputs', files.inputs, '--threads', String(o.threads), '--warmup', String(o.warmup), '--reps', String(o.reps),
        '--budget', String(o.budget)], { timeoutS: o.timeout, env: pythonEnv(o.threads, ctx.openblas) });
      peer.outcome = outcomeOf(r);
      peer.detail = torchDetail(r, ctx.openblas);
      const oursLoss = lastEvent(oursRun, 'result')?.firstLoss, peerLoss = eventsOf(r, 'sample')[0]?.loss;
      if (typeof oursLoss === 'number' && typeof peerLoss === 'number') agreement = { oursLoss, peerLoss };
    }
    ctx.log(`${tag} PyTorch: ${describe(peer.outcome, itemsPerStep(spec), unit(spec))}`);
  }
  return row(spec, 'train', ours, peer, agreement);
}

function row(spec: ModelSpec, mode: 'infer' | 'train', ours: Outcome, peer: ModelResult['peer'], agreement: ModelResult['agreement']): ModelResult {
  return { model: spec.id, title: spec.title, batch: spec.batch, mode, unit: unit(spec), items: itemsPerStep(spec),
    flops: mode === 'infer' ? forwardFlops(spec) : trainFlops(spec), ours, peer, agreement };
}

/** Every requested mode of one model. */
export async function runModel(spec: ModelSpec, ctx: SuiteContext): Promise<ModelResult[]> {
  fs.mkdirSync(ctx.opts.cacheDir, { recursive: true });
  const files = await prepareFiles(spec, ctx);
  const out: ModelResult[] = [];
  for (const mode of ctx.opts.modes) {
    if (typeof files === 'string') {
      out.push(row(spec, mode, missing('failed', files), null, null));
      ctx.log(`[${spec.id}] ${files}`);
    } else {
      const rounds: ModelResult[] = [];
      for (let r = 0; r < ctx.opts.rounds; r++)
        rounds.push(mode === 'infer' ? await inference(spec, files, ctx) : await training(spec, files, ctx));
      out.push(pooled(rounds));
    }
  }
  return out;
}
