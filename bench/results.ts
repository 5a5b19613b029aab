/**
 * What a measurement yields (an Outcome) and the shape of the results the harness prints and
 * writes as JSON.
 */
import { eventsOf, failureReason, lastEvent, type ChildResult } from './child';
import type { OpFamily } from './cli';
import { median } from './sampling';
import type { Bf16Row } from './bf16_suite';
import type { StepBreakdown } from './step_breakdown';

export interface Measured {
  status: 'ok';
  /** Seconds of each timed run. */
  samples: number[];
  medianSeconds: number;
  /** Peak resident set of the measuring process, kB (null when unknown). */
  maxRssKb: number | null;
  /** e.g. stopped at the time limit after n runs. */
  note?: string;
}

export interface Missing {
  /** skipped: not run by design (a slow ISA variant on a large case). */
  status: 'unavailable' | 'failed' | 'timeout' | 'skipped';
  reason: string;
  /** A timed-out peer that finished no run: its run takes at least this long. */
  atLeastSeconds?: number;
  maxRssKb?: number | null;
}

export type Outcome = Measured | Missing;

export const missing = (status: Missing['status'], reason: string): Missing => ({ status, reason });

/** The median seconds of a measured outcome, else null. */
export const seconds = (o: Outcome | null | undefined): number | null => (o?.status === 'ok' ? o.medianSeconds : null);

/**
 * The fastest timed run of a measured outcome, else null: on a shared machine, where other
 * processes only ever slow a run down, the closest to what the code does alone.
 */
export const fastestRun = (o: Outcome | null | undefined): number | null => (o?.status === 'ok' ? Math.min(...o.samples) : null);

/** The Outcome of a child that reported `sample` events (ours, onnxruntime, PyTorch). */
export function outcomeOf(r: ChildResult): Outcome {
  const unavailable = lastEvent(r, 'unavailable');
  if (unavailable) return missing('unavailable', String(unavailable.reason));
  const runs = eventsOf(r, 'sample');
  const timed = runs.filter((e) => !e.warmup).map((e) => Number(e.seconds));
  const rss = lastEvent(r, 'result')?.maxRssKb;
  const maxRssKb = typeof rss === 'number' ? rss : r.killedAtRssKb;
  const ok = (samples: number[], note?: string): Measured =>
    ({ status: 'ok', samples, medianSeconds: median(samples), maxRssKb, ...(note ? { note } : {}) });
  if (r.timedOut) {
    if (timed.length) return ok(timed, `stopped at the time limit after ${timed.length} timed run(s)`);
    if (runs.length) return ok(runs.map((e) => Number(e.seconds)), 'stopped at the time limit: warm-up run only');
    const ready = lastEvent(r, 'ready');
    const atLeastSeconds = ready ? r.seconds - Number(ready.at) : undefined;
    return { status: 'timeout', reason: failureReason(r), ...(atLeastSeconds ? { atLeastSeconds } : {}), maxRssKb };
  }
  if (r.exitCode !== 0 || !timed.length) return missing('failed', failureReason(r));
  return ok(timed);
}

/** The timed runs of several measurements of one thing, pooled (the first failure when none ran). */
export function pool(outcomes: Outcome[]): Outcome {
  const ran = outcomes.filter((o): o is Measured => o.status === 'ok');
  if (ran.length <= 1) return ran[0] ?? outcomes[0];
  const samples = ran.flatMap((o) => o.samples), rss = ran.map((o) => o.maxRssKb).filter((kb): kb is number => kb != null);
  const notes = ran.map((o) => o.note).filter(Boolean);
  return { status: 'ok', samples, medianSeconds: median(samples), maxRssKb: rss.length ? Math.max(...rss) : null,
    ...(notes.length ? { note: notes.join('; ') } : {}) };
}

/** One model measurement repeated in rounds: each side's (each peer variant's) timed runs pooled, the first round's agreement checks. */
export function pooled(rounds: ModelResult[]): ModelResult {
  const [first] = rounds;
  if (rounds.length === 1) return first;
  const same = (p: PeerResult) => (q: PeerResult) => q.name === p.name && q.variant === p.variant;
  const oursVariants = first.oursVariants?.map((v) => ({
    ...v, outcome: pool(rounds.map((r) => r.oursVariants?.find((w) => w.variant === v.variant)?.outcome).filter((o): o is Outcome => !!o)),
  }));
  return {
    ...first,
    ...(oursVariants ? { oursVariants, ours: fastestVariant(oursVariants)!.outcome } : { ours: pool(rounds.map((r) => r.ours)) }),
    peers: first.peers.map((p) => ({
      ...p, outcome: pool(rounds.map((r) => r.peers.find(same(p))?.outcome).filter((o): o is Outcome => !!o)),
    })),
  };
}

/** Of one side's variants (ours, or one peer's), the one that stands for it: the fastest that ran (by median), else the first; undefined when there are none. */
export function fastestVariant<T extends { outcome: Outcome }>(variants: readonly T[]): T | undefined {
  const ran = variants.filter((v) => v.outcome.status === 'ok') as (T & { outcome: Measured })[];
  return ran.sort((a, b) => a.outcome.medianSeconds - b.outcome.medianSeconds)[0] ?? variants[0];
}

/** The variant of a peer that stands for it (fastestVariant); undefined when absent. */
export function bestOf(peers: readonly PeerResult[], name: PeerName): PeerResult | undefined {
  return fastestVariant(peers.filter((p) => p.name === name));
}

export type PeerName = 'onnxruntime-node' | 'PyTorch';

/** A peer's name in a table cell. */
export const shortName = (p: PeerName): string => (p === 'onnxruntime-node' ? 'onnxruntime' : p);

/**
 * What a model row measures: inference ('infer'), inference at precision 'int8' ('int8': ours
 * setPrecision('int8'), onnxruntime-node on onnxruntime's own quantize_dynamic(QInt8) of the export),
 * or the training step ('train').
 */
export type Mode = 'infer' | 'int8' | 'train';
/** How the report names a mode. */
export const modeName = (m: Mode): string => (m === 'infer' ? 'inference' : m === 'int8' ? 'int8 inference' : 'training');

/** That a peer ran the same model: logits (inference) or the first step's loss (training) against ours. */
export interface Agreement {
  maxAbsDiff?: number;
  maxAbs?: number;
  oursLoss?: number;
  peerLoss?: number;
}

export interface PeerResult {
  name: PeerName;
  /** How its threads wait (variants.ts): each peer is measured in each variant. */
  variant: string;
  outcome: Outcome;
  agreement: Agreement | null;
}

export interface ModelResult {
  model: string;
  title: string;
  batch: number;
  mode: Mode;
  unit: 'img/s' | 'tok/s';
  /** Images or tokens per step. */
  items: number;
  /** Analytic FLOPs of one step (flops.ts). */
  flops: number;
  /** Ours in the variant that stands for it: the faster of oursVariants (by median). */
  ours: Outcome;
  /** Ours in each of its thread-waiting variants (variants.ts OURS_VARIANTS); ours is the faster. */
  oursVariants?: { variant: string; outcome: Outcome }[];
  /** onnxruntime-node and PyTorch (inference), PyTorch (training): those requested, each in every variant (variants.ts). */
  peers: PeerResult[];
  /** Our step measured op by op inside it (step_breakdown.ts; the first round's), when ours ran. */
  breakdown?: StepBreakdown | null;
}

export interface IsaPeak {
  isa: string;
  gflops: number;
  threads: number;
}

/**
 * One row of the operator table: one pass (forward, backward, a GEMM of the backward, an
 * optimizer step) of one operator at one model's shapes, ours against PyTorch's.
 */
export interface OpRow {
  model: string;
  /** The case it measures: its family and, for Linears and attention, its label (op_cases.ts). */
  family: OpFamily;
  label: string;
  /** e.g. 'GEMM fc1', 'attention layer', 'GELU'. */
  op: string;
  pass: string;
  /** The shape in words, e.g. '4160×512×128' or 'B8 H12 T197 Dh64'. */
  shape: string;
  /** FLOPs of the pass when it is a matrix product (GFLOP/s and % of peak); null otherwise. */
  flops: number | null;
  ours: Outcome;
  /** The faster of PyTorch's variants for this pass (variants.ts), which `torchVariant` names. */
  torch: Outcome;
  torchVariant?: string;
  /**
   * Ours is not a separate kernel here (it is fused into a layer op): its time is the median of
   * the paired differences between the layer and the layer's Linears, timed in turn.
   */
  derived?: string;
}

export interface Results {
  date: string;
  /** How the run was started (npm run bench -- <arguments>). */
  command: string;
  machine: Record<string, unknown>;
  options: Record<string, unknown>;
  /** The ISA our kernels ran on (the active one: the best this CPU has unless NF_ISA says otherwise). */
  isa: string;
  /** The kernels of our bf16 products there (isaInfo().bf16Kernels: amx, vdpbf16ps or fp32); absent in older results. */
  bf16Kernels?: string;
  peaks: IsaPeak[];
  /** Each peer's version and what it runs on. */
  peers: Record<string, string>;
  models: ModelResult[];
  ops: OpRow[];
  /** The bf16 rows (bf16_suite.ts): ours at bf16 against ours at fp32, and PyTorch autocast bf16. */
  bf16?: Bf16Row[];
}
