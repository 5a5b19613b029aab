/**
 * The kernel benchmarks, per ISA variant: GEMM at the models' Linear shapes and at large squares
 * (against OpenBLAS through numpy when an OpenBLAS is present), the attention layer forward and
 * backward at T = 65, 197, 1024, 4096 with the memory it keeps (O(T)) next to the T×T a naive
 * version needs, and LayerNorm. Each family runs in its own worker process per ISA (attention:
 * per T as well, so each T's peak RSS is its own).
 *
 * Every case runs on the best variant; a lower variant (the scalar one, say) runs the cases whose
 * one run should take at most half the kernel budget at half that variant's measured FMA peak, and
 * at least the smallest case, so slow variants are compared on the small cases only. Kernel
 * measurements get a quarter of the models' time budget (--budget), at most 5 s each.
 */
import { eventsOf, failureReason, lastEvent, runWorker } from './child';
import type { KernelFamily, Options } from './cli';
import { attentionForwardFlops, gemmFlops } from './flops';
import { pythonEnv, runScript } from './peers';
import type { AttentionCase, GemmCase, LayerNormCase, Repeat } from './protocol';
import { missing, type AttentionResult, type GemmResult, type IsaPeak, type LayerNormResult, type Outcome, type Results } from './results';
import { median } from './sampling';
import { MODELS, type ModelSpec } from './specs';
import type { SuiteContext } from './model_suite';

const SHAPE_MODELS = ['seed-cifar', 'seed-stl10', 'vit-b16-b8'];
const QUICK_SHAPE_MODELS = ['seed-cifar'];

function vitTokens(spec: ModelSpec): { rows: number; D: number; F: number } {
  if (spec.arch.kind !== 'vit') throw new Error(`${spec.id} is not a ViT`);
  const a = spec.arch;
  return { rows: spec.batch * ((a.imgSize / a.patchSize) ** 2 + 1), D: a.dModel, F: a.dFF };
}

const specsOf = (ids: readonly string[]) => ids.map((id) => MODELS.find((m) => m.id === id)!);

/** The Linear GEMMs of a ViT's blocks (x·Wᵀ over every token of the batch) and large squares. */
export function gemmCases(quick: boolean): GemmCase[] {
  const linear = specsOf(quick ? QUICK_SHAPE_MODELS : SHAPE_MODELS).flatMap((spec) => {
    const { rows: M, D, F } = vitTokens(spec);
    return [
      { label: `${spec.id} qkv`, M, N: 3 * D, K: D, transB: true },
      { label: `${spec.id} fc1`, M, N: F, K: D, transB: true },
      { label: `${spec.id} fc2`, M, N: D, K: F, transB: true },
    ];
  });
  const squares = (quick ? [1024] : [1024, 2048, 4096]).map((n) => ({ label: `square ${n}`, M: n, N: n, K: n, transB: false }));
  return [...linear, ...squares];
}

export function attentionCases(quick: boolean): AttentionCase[] {
  return (quick ? [65, 197] : [65, 197, 1024, 4096]).map((T) => ({ B: 1, T, D: 768, H: 12 }));
}

export function layernormCases(quick: boolean): LayerNormCase[] {
  return specsOf(quick ? QUICK_SHAPE_MODELS : SHAPE_MODELS).map((spec) => {
    const { rows, D } = vitTokens(spec);
    return { label: spec.id, rows, D };
  });
}

/** The limit of a worker that measures `n` cases one after the other (--timeout per two cases). */
function familyTimeout(o: Options, n: number): number {
  return o.timeout * Math.max(1, n / 2);
}

function kernelRepeat(o: Options): Repeat {
  return { warmup: o.warmup, reps: o.reps, budget: Math.min(5, o.budget / 4) };
}

/** Which cases (of these FLOPs per run) are measured on the variant of `peak` (see the file comment). */
function chosen(flops: readonly number[], peak: IsaPeak, peaks: readonly IsaPeak[], r: Repeat): boolean[] {
  if (peak === peaks.at(-1)) return flops.map(() => true);
  const fit = flops.map((f) => f / (0.5 * peak.gflops * 1e9) <= Math.max(r.budget, 0.5) / 2);
  if (!fit.some(Boolean)) fit[flops.indexOf(Math.min(...flops))] = true;
  return fit;
}

function samplesOutcome(samples: unknown): Outcome {
  return Array.isArray(samples) && samples.length
    ? { status: 'ok', samples: samples as number[], medianSeconds: median(samples as number[]), maxRssKb: null }
    : missing('failed', 'no timed run');
}

const skipped = (peak: IsaPeak) => missing('skipped', `too slow on ${peak.isa} for the time budget`);

async function gemmSuite(ctx: SuiteContext, peaks: IsaPeak[]): Promise<GemmResult[]> {
  const o = ctx.opts, r = kernelRepeat(o), cases = gemmCases(o.quick);
  let openblas: Outcome[] | null = null;
  if (o.peers.includes('openblas')) {
    if (!ctx.python.numpy) {
      openblas = cases.map(() => missing('unavailable', ctx.python.reason ?? 'numpy missing'));
    } else {
      const run = await runScript('blas_gemm_bench.py', ['--shapes', JSON.stringify(cases), '--warmup', String(r.warmup),
        '--reps', String(r.reps), '--budget', String(r.budget)], { timeoutS: familyTimeout(o, cases.length), env: pythonEnv(o.threads, ctx.openblas) });
      const unavailable = lastEvent(run, 'unavailable');
      const byIndex = new Map(eventsOf(run, 'case').map((e) => [Number(e.index), e.samples]));
      openblas = cases.map((_, i) => unavailable ? missing('unavailable', String(unavailable.reason))
        : byIndex.has(i) ? samplesOutcome(byIndex.get(i)) : missing('failed', failureReason(run)));
      const ready = lastEvent(run, 'ready');
      ctx.log(`[gemm] OpenBLAS: ${unavailable ? String(unavailable.reason) : ready ? JSON.stringify(ready.blas) : failureReason(run)}`);
    }
  }
  const out: GemmResult[] = [];
  for (const peak of peaks) {
    const run = chosen(cases.map((c) => gemmFlops(c.M, c.N, c.K)), peak, peaks, r);
    const todo = cases.filter((_, i) => run[i]);
    const res = todo.length ? await runWorker({ task: 'gemm', isa: peak.isa, threads: o.threads, cases: todo, repeat: r },
      { timeoutS: familyTimeout(o, todo.length) }) : null;
    const byIndex = new Map(res ? eventsOf(res, 'case').map((e) => [Number(e.index), e.samples]) : []);
    let j = 0;
    cases.forEach((c, i) => {
      const ours = !run[i] ? skipped(peak) : byIndex.has(j) ? samplesOutcome(byIndex.get(j)) : missing('failed', res ? failureReason(res) : '');
      if (run[i]) j++;
      out.push({ ...c, isa: peak.isa, ours, openblas: openblas?.[i] ?? null });
    });
    ctx.log(`[gemm] ${peak.isa}: ${todo.length} of ${cases.length} cases`);
  }
  return out;
}

async function attentionSuite(ctx: SuiteContext, peaks: IsaPeak[]): Promise<AttentionResult[]> {
  const o = ctx.opts, r = kernelRepeat(o), out: AttentionResult[] = [], shapes = attentionCases(o.quick);
  // forward + backward ≈ 3 forwards
  const run = new Map(peaks.map((p) => [p, chosen(shapes.map((s) => 3 * attentionForwardFlops(s.B, s.T, s.D)), p, peaks, r)]));
  for (const [i, shape] of shapes.entries()) {
    for (const peak of peaks) {
      const naiveWeightsBytes = 4 * shape.B * shape.H * shape.T * shape.T;
      const base = { ...shape, isa: peak.isa, naiveWeightsBytes };
      if (!run.get(peak)![i]) {
        out.push({ ...base, forward: skipped(peak), backward: skipped(peak), savedBytes: null, extraPeakRssKb: null });
        continue;
      }
      const res = await runWorker({ task: 'attention', isa: peak.isa, threads: o.threads, shape, repeat: r }, { timeoutS: o.timeout });
      const fig = lastEvent(res, 'result');
      const fail = missing(res.timedOut ? 'timeout' : 'failed', failureReason(res));
      out.push({ ...base, forward: fig ? samplesOutcome(fig.forward) : fail, backward: fig ? samplesOutcome(fig.backward) : fail,
        savedBytes: fig ? Number(fig.savedBytes) : null, extraPeakRssKb: fig ? Number(fig.extraPeakRssKb) : null });
      ctx.log(`[attention] T=${shape.T} ${peak.isa}: ${fig ? 'done' : fail.reason}`);
    }
  }
  return out;
}

async function layernormSuite(ctx: SuiteContext, peaks: IsaPeak[]): Promise<LayerNormResult[]> {
  const o = ctx.opts, r = kernelRepeat(o), cases = layernormCases(o.quick), out: LayerNormResult[] = [];
  for (const peak of peaks) {
    const res = await runWorker({ task: 'layernorm', isa: peak.isa, threads: o.threads, cases, repeat: r },
      { timeoutS: familyTimeout(o, cases.length) });
    const byIndex = new Map(eventsOf(res, 'case').map((e) => [Number(e.index), e]));
    cases.forEach((c, i) => {
      const e = byIndex.get(i), fail = missing('failed', failureReason(res));
      out.push({ ...c, isa: peak.isa, forward: e ? samplesOutcome(e.forward) : fail, backward: e ? samplesOutcome(e.backward) : fail });
    });
    ctx.log(`[layernorm] ${peak.isa}: done`);
  }
  return out;
}

/** Runs the requested kernel families on every ISA variant with a measured peak. */
export async function runKernels(ctx: SuiteContext, peaks: IsaPeak[], families: readonly KernelFamily[]): Promise<Results['kernels']> {
  return {
    gemm: families.includes('gemm') ? await gemmSuite(ctx, peaks) : [],
    attention: families.includes('attention') ? await attentionSuite(ctx, peaks) : [],
    layernorm: families.includes('layernorm') ? await layernormSuite(ctx, peaks) : [],
  };
}
