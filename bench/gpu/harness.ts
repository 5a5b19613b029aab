/**
 * The GPU benchmark and check (issue 22, item 6), the Node side; scripts/gpu_bench.sh runs it on a
 * lent GPU (bundled by esbuild into .gpu/gpu_bench.cjs, since that machine has no tsx) and, with
 * `--dry`, here on the SIMT emulator at tiny shapes. Subcommands, each printing JSON:
 *
 *   plan [--dry]                 the rows both sides time: model (bench/specs.ts), batch, mode
 *                                (infer | train), precision (fp32 | tf32 | bf16), warm-up and timed
 *                                iterations; what bench/gpu/torch_peer.py reads too
 *   ours PLAN [--precision P]    times every row on 'cuda' (CUDA graphs on, as by default; a JSON
 *                                line per row: median and min ms, and whether graphs replayed); with
 *                                --precision only that precision's rows (scripts/gpu_bench.sh runs one
 *                                process per precision, so a crash in one keeps the others)
 *   checks PLAN                  the correctness pass: each precision's logits against the CPU's
 *                                fp32 logits (same weights, same images; relative error, limits fp32
 *                                1e-4, tf32 3e-3, bf16 3e-2), and the loss curve: the seed-cifar model
 *                                trained in bf16 and in fp32 from the same start on the same batches,
 *                                the bf16 curve within 2% of the fp32 one (means over windows of 20
 *                                steps), and the device bytes one training forward of that model keeps
 *                                for backward at fp32 and at bf16 (cudaMemoryStats().requestedBytes;
 *                                bf16 must keep fewer)
 *   profile PLAN                 two eager training steps (graphs off) of ViT-B/16 B8 (NF_PROFILE_BATCH) at bf16, or
 *                                two inference calls with NF_PROFILE_MODE=infer, for
 *                                ncu to time kernel by kernel (scripts/gpu_bench.sh sums them per kernel)
 *   report PLAN OURS TORCH OUT   joins both sides' lines into rows (ms, ratio = PyTorch ms / ours,
 *                                MFU = FLOPs / time / the precision's H100 peak), writes OUT (JSON)
 *                                and prints the markdown table
 *
 * Timing: a step's loss (training) or a copy of the logits to the host (inference) waits for the
 * device, then the clock is read; warm-up iterations first (the first runs eagerly, the second is
 * captured as a CUDA graph), the median of the timed ones reported.
 * FLOPs: bench/flops.ts (forward: every matrix product, attention dense; training 3× forward).
 * H100 SXM dense peaks: fp32 67 (no tensor cores), tf32 495, bf16 989 TFLOP/s.
 */
import * as fs from 'node:fs';

import {
  AdamW, cudaGraphStats, cudaMemoryStats, setCudaGraphs, Tensor, trainStep, ViTClassifier, type Precision,
} from '../../lib/index';
import { cuda } from '../../lib/core/device';
import { forwardFlops, trainFlops } from '../flops';
import {
  curveComparisons, CURVE_LIMIT, CURVE_WINDOW, patternBatch, trainCurve, vitConfig, windowRelDiffs, writeCurveFiles,
} from '../loss_curve';
import { median } from '../sampling';
import { MODELS, type ModelSpec, type ViTArch } from '../specs';

/** The GPU's precisions ('int8' is CPU inference only). */
type GpuPrecision = Exclude<Precision, 'int8'>;
const PRECISIONS: readonly GpuPrecision[] = ['fp32', 'tf32', 'bf16'];
const PEAK_TFLOPS: Record<GpuPrecision, number> = { fp32: 67, tf32: 495, bf16: 989 };
const LOGIT_LIMIT: Record<GpuPrecision, number> = { fp32: 1e-4, tf32: 3e-3, bf16: 3e-2 };

interface Row {
  id: string;
  arch: ViTArch;
  batch: number;
  mode: 'infer' | 'train';
  precision: GpuPrecision;
  warmup: number;
  reps: number;
}

interface Plan {
  dry: boolean;
  rows: Row[];
  /** Images of the correctness pass, per model. */
  checkBatch: number;
  /** Steps of the loss-curve check. */
  curveSteps: number;
}

/** The four models: seed-cifar B64, seed-stl10 B16, ViT-B/16 B8 and B64 (dry: tiny shapes). */
function makePlan(dry: boolean): Plan {
  const spec = (id: string) => MODELS.find((m) => m.id === id)!;
  const models: { id: string; spec: ModelSpec; batch: number }[] = dry
    ? [{ id: 'tiny', spec: spec('tiny'), batch: 2 }]
    : [
      { id: 'seed-cifar', spec: spec('seed-cifar'), batch: 64 },
      { id: 'seed-stl10', spec: spec('seed-stl10'), batch: 16 },
      { id: 'vit-b16', spec: spec('vit-b16-b8'), batch: 8 },
      { id: 'vit-b16', spec: spec('vit-b16-b8'), batch: 64 },
    ];
  const rows: Row[] = [];
  for (const m of models)
    for (const mode of ['infer', 'train'] as const)
      for (const precision of PRECISIONS)
        rows.push({ id: m.id, arch: m.spec.arch as ViTArch, batch: m.batch, mode, precision,
          warmup: dry ? 3 : 5, reps: dry ? 2 : m.batch >= 64 && m.id === 'vit-b16' ? 10 : 30 });
  return { dry, rows, checkBatch: 2, curveSteps: dry ? 6 : 300 };
}

/** Deterministic images [B, C, S, S] in [-1, 1] and labels, as host arrays. */
function data(arch: ViTArch, B: number, salt: number): { x: Float32Array; y: Int32Array } {
  const n = B * arch.inChannels * arch.imgSize ** 2;
  const x = Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.37 + salt * 1.3));
  // Labels from a fixed projection of the image (learnable, so the loss curve falls).
  const y = Int32Array.from({ length: B }, (_, b) => {
    let s = 0;
    for (let i = 0; i < n / B; i += 7) s += x[b * (n / B) + i] * Math.cos(i);
    return Math.abs(Math.floor(s * 3)) % arch.numClasses;
  });
  return { x, y };
}

/** Times one row; returns its JSON line's fields. */
function timeRow(r: Row): Record<string, unknown> {
  const model = new ViTClassifier(vitConfig(r.arch, r.precision, 'cuda'));
  const { x, y } = data(r.arch, r.batch, 0);
  const images = Tensor.from(x, [r.batch, r.arch.inChannels, r.arch.imgSize, r.arch.imgSize], 'cuda');
  const labels = Tensor.from(y, [r.batch], 'cuda');
  const replays = cudaGraphStats().replays;
  const ms: number[] = [];
  try {
    if (r.mode === 'train') {
      const opt = new AdamW(model.parameters(), { lr: 1e-4 });
      for (let i = 0; i < r.warmup + r.reps; i++) {
        const t0 = performance.now();
        trainStep(model, opt, images, labels); // (returns the loss: the device has finished)
        if (i >= r.warmup) ms.push(performance.now() - t0);
      }
      opt.dispose();
    } else {
      model.eval();
      for (let i = 0; i < r.warmup + r.reps; i++) {
        const t0 = performance.now();
        const logits = model.forward(images);
        logits.toArray(); // (waits for the device)
        if (i >= r.warmup) ms.push(performance.now() - t0);
        logits.dispose();
      }
    }
  } finally {
    model.dispose();
    images.dispose();
    labels.dispose();
  }
  return { medianMs: median(ms), minMs: Math.min(...ms), graphReplays: cudaGraphStats().replays - replays };
}

/** ‖a − b‖ / ‖b‖. */
function relErr(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let num = 0, den = 0;
  for (let i = 0; i < b.length; i++) {
    num += (a[i] - b[i]) ** 2;
    den += b[i] ** 2;
  }
  return Math.sqrt(num / den);
}

/** Each precision's logits on 'cuda' against the CPU's fp32 logits, per model of the plan. */
function logitChecks(plan: Plan): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  const seen = new Set<string>();
  for (const r of plan.rows) {
    if (seen.has(r.id)) continue;
    seen.add(r.id);
    const B = plan.checkBatch, { x } = data(r.arch, B, 5), shape = [B, r.arch.inChannels, r.arch.imgSize, r.arch.imgSize];
    const cpu = new ViTClassifier(vitConfig(r.arch, 'fp32', 'cpu')).eval();
    const want = cpu.forward(Tensor.from(x, shape)).toArray();
    cpu.dispose();
    for (const precision of PRECISIONS) {
      const m = new ViTClassifier(vitConfig(r.arch, precision, 'cuda')).eval();
      const images = Tensor.from(x, shape, 'cuda');
      const err = relErr(m.forward(images).toArray(), want);
      out.push({ check: 'logits', id: r.id, precision, relErr: err, limit: LOGIT_LIMIT[precision], pass: err < LOGIT_LIMIT[precision] });
      m.dispose();
      images.dispose();
    }
  }
  return out;
}

/** The seed-cifar model trained `steps` steps in bf16 and in fp32 (same start, same batches): the curves' windowed means. */
function lossCurve(plan: Plan): Record<string, unknown> {
  const spec = MODELS.find((m) => m.id === (plan.dry ? 'tiny' : 'seed-cifar'))!, arch = spec.arch as ViTArch, B = plan.dry ? 2 : 64;
  const batches = Array.from({ length: plan.curveSteps }, (_, k) => patternBatch(arch, B, k));
  const fp32 = trainCurve(arch, batches, 'fp32', 'cuda'), bf16 = trainCurve(arch, batches, 'bf16', 'cuda');
  const windows = windowRelDiffs(bf16, fp32), worst = Math.max(...windows);
  if (process.env.NF_CURVE_DIR) writeCurveFiles(process.env.NF_CURVE_DIR, arch, batches, { fp32, bf16 });
  return { check: 'lossCurve', id: spec.id, steps: plan.curveSteps, window: Math.min(CURVE_WINDOW, plan.curveSteps),
    worstWindowRelDiff: worst, windows, limit: CURVE_LIMIT, pass: worst <= CURVE_LIMIT && bf16.every(Number.isFinite),
    firstLoss: { fp32: fp32[0], bf16: bf16[0] }, lastLoss: { fp32: fp32[fp32.length - 1], bf16: bf16[bf16.length - 1] },
    curves: { fp32, bf16 } };
}

/** The device bytes one training forward of the loss-curve model keeps for backward, at fp32 and at bf16 (activation storage). */
function activationBytes(plan: Plan): Record<string, unknown> {
  const spec = MODELS.find((m) => m.id === (plan.dry ? 'tiny' : 'seed-cifar'))!, arch = spec.arch as ViTArch, B = plan.dry ? 2 : 64;
  const { x } = data(arch, B, 3);
  const bytes = (precision: GpuPrecision) => {
    const model = new ViTClassifier(vitConfig(arch, precision, 'cuda'));
    const images = Tensor.from(x, [B, arch.inChannels, arch.imgSize, arch.imgSize], 'cuda');
    try {
      model.eval().forward(images).dispose(); // (keeps nothing; the weights' bf16 copies and scratch made, not counted)
      model.train();
      const before = cudaMemoryStats().requestedBytes;
      const out = model.forward(images);
      const kept = cudaMemoryStats().requestedBytes - before;
      out.dispose();
      return kept;
    } finally {
      model.dispose();
      images.dispose();
    }
  };
  const fp32 = bytes('fp32'), bf16 = bytes('bf16'), ratio = bf16 / fp32;
  return { check: 'activationBytes', id: spec.id, batch: B, bytes: { fp32, bf16 }, ratio, limit: '< 1', pass: ratio < 1 };
}

function ours(planFile: string, precision?: string): void {
  const plan = JSON.parse(fs.readFileSync(planFile, 'utf8')) as Plan;
  const info = cuda().backendInfo();
  console.log(JSON.stringify({ side: 'ours', emulated: info.emulated, gemm: info.gemm.backend, library: info.gemm.library }));
  for (const r of plan.rows.filter((row) => precision === undefined || row.precision === precision)) {
    let line: Record<string, unknown>;
    try {
      line = { ...timeRow(r) };
    } catch (e) {
      line = { error: `${(e as { code?: string }).code ?? 'Error'}: ${(e as Error).message}` };
    }
    console.log(JSON.stringify({ side: 'ours', id: r.id, batch: r.batch, mode: r.mode, precision: r.precision, ...line }));
  }
}

function checks(planFile: string): void {
  const plan = JSON.parse(fs.readFileSync(planFile, 'utf8')) as Plan;
  for (const [check, run] of [['logits', logitChecks], ['lossCurve', lossCurve], ['activationBytes', activationBytes]] as const) {
    try {
      for (const line of [run(plan)].flat()) console.log(JSON.stringify({ side: 'ours', ...line }));
    } catch (e) {
      console.log(JSON.stringify({ side: 'ours', check, pass: false, error: (e as Error).message }));
    }
  }
}

/**
 * Two eager training steps (or, with NF_PROFILE_MODE=infer, two inference calls) of the plan's largest
 * model in bf16 (ncu times each kernel): batch 8, or NF_PROFILE_BATCH.
 */
function profile(planFile: string): void {
  const plan = JSON.parse(fs.readFileSync(planFile, 'utf8')) as Plan;
  const mode = process.env.NF_PROFILE_MODE ?? 'train';
  if (mode !== 'train' && mode !== 'infer') throw new Error(`NF_PROFILE_MODE must be train or infer, got ${mode}`);
  const row = plan.rows.find((r) => r.mode === mode && r.precision === 'bf16' && r.id === (plan.dry ? 'tiny' : 'vit-b16'))!;
  const batch = plan.dry ? 2 : Number(process.env.NF_PROFILE_BATCH ?? 8);
  if (!Number.isInteger(batch) || batch < 1) throw new Error(`NF_PROFILE_BATCH must be a positive integer, got ${process.env.NF_PROFILE_BATCH}`);
  setCudaGraphs(false);
  const ms = timeRow({ ...row, batch, warmup: 1, reps: 1 });
  console.log(JSON.stringify({ side: 'ours', profile: `${row.id} B${batch} ${mode} bf16, eager`, ...ms }));
}

const rowKey = (r: { id: string; batch: number; mode: string; precision: string }) => `${r.id}|${r.batch}|${r.mode}|${r.precision}`;

function readLines(file: string): Record<string, unknown>[] {
  if (!fs.existsSync(file)) return [];
  return fs.readFileSync(file, 'utf8').split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
}

function report(planFile: string, oursFile: string, torchFile: string, outFile: string): void {
  const plan = JSON.parse(fs.readFileSync(planFile, 'utf8')) as Plan;
  const mine = readLines(oursFile), theirs = readLines(torchFile);
  const byKey = (lines: Record<string, unknown>[]) => new Map(lines.filter((l) => l.mode).map((l) => [rowKey(l as never), l]));
  const o = byKey(mine), t = byKey(theirs);
  const fmt = (v: unknown, d = 2) => (typeof v === 'number' && Number.isFinite(v) ? v.toFixed(d) : '—');
  const rows = plan.rows.map((r) => {
    const spec: ModelSpec = { id: r.id, title: '', arch: r.arch, batch: r.batch };
    const flops = r.mode === 'train' ? trainFlops(spec) : forwardFlops(spec);
    const a = o.get(rowKey(r)), b = t.get(rowKey(r));
    const oursMs = a?.medianMs as number | undefined, torchMs = b?.medianMs as number | undefined;
    const mfu = (ms?: number) => (ms ? flops / (ms / 1e3) / (PEAK_TFLOPS[r.precision] * 1e12) : undefined);
    return { id: r.id, batch: r.batch, mode: r.mode, precision: r.precision, flops, oursMs, torchMs,
      ratio: oursMs && torchMs ? torchMs / oursMs : undefined, oursMfu: mfu(oursMs), torchMfu: mfu(torchMs),
      graphReplays: a?.graphReplays, error: a?.error ?? b?.error };
  });
  const checks = mine.filter((l) => l.check);
  const head = mine.find((l) => !l.mode && !l.check) ?? {}, torchHead = theirs.find((l) => !l.mode) ?? {};
  fs.writeFileSync(outFile, JSON.stringify({ ours: head, torch: torchHead, rows, checks }, null, 2));
  console.log(`ours: ${head.emulated ? 'SIMT emulator (dry run: the numbers mean nothing)' : 'GPU'}, GEMMs ${head.gemm ?? '?'}; ` +
    `PyTorch: ${torchHead.torch ?? 'not run'} ${torchHead.device ?? ''} ${torchHead.model ?? ''}`);
  console.log('\n| model | B | mode | precision | ours ms | PyTorch ms | ratio (PyTorch / ours) | ours MFU | PyTorch MFU | graph replays |');
  console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |');
  for (const r of rows)
    console.log(`| ${r.id} | ${r.batch} | ${r.mode} | ${r.precision} | ${fmt(r.oursMs)} | ${fmt(r.torchMs)} | ${fmt(r.ratio)} | ` +
      `${r.oursMfu === undefined ? '—' : (100 * r.oursMfu).toFixed(1) + '%'} | ${r.torchMfu === undefined ? '—' : (100 * r.torchMfu).toFixed(1) + '%'} | ` +
      `${r.graphReplays ?? '—'} |` +
      (r.error ? ` ${String(r.error).slice(0, 80)}` : ''));
  console.log('\n| check | model | precision | value | limit | pass |');
  console.log('| --- | --- | --- | --- | --- | --- |');
  for (const c of checks)
    console.log(`| ${c.check} | ${c.id ?? ''} | ${c.precision ?? 'bf16 vs fp32'} | ${fmt((c.relErr ?? c.worstWindowRelDiff ?? c.ratio) as number, 6)} | ` +
      `${c.limit ?? ''} | ${c.pass ? 'yes' : 'NO'} |`);
  // The loss curves beside PyTorch's own on the same weights and batches (bench/gpu/torch_curve.py).
  const curve = checks.find((c) => c.check === 'lossCurve' && c.curves), torchCurve = theirs.find((l) => l.check === 'lossCurve');
  if (curve) {
    console.log('\n| loss curves, windows of 20 steps | worst window |');
    console.log('| --- | --- |');
    for (const c of curveComparisons(curve.curves as never, torchCurve as never))
      console.log(`| ${c.what} | ${(100 * c.worst).toFixed(2)}% |`);
  }
}

const [command, ...rest] = process.argv.slice(2);
if (command === 'plan') console.log(JSON.stringify(makePlan(rest.includes('--dry'))));
else if (command === 'ours' && rest[0]) ours(rest[0], rest[1] === '--precision' ? rest[2] : undefined);
else if (command === 'checks' && rest[0]) checks(rest[0]);
else if (command === 'profile' && rest[0]) profile(rest[0]);
else if (command === 'report' && rest.length === 4) report(rest[0], rest[1], rest[2], rest[3]);
else {
  console.error('usage: harness plan [--dry] | ours PLAN [--precision P] | checks PLAN | profile PLAN | report PLAN OURS TORCH OUT (see the file header)');
  process.exit(2);
}
