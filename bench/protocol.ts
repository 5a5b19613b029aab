/**
 * How the harness (run.ts) talks to its child processes: a request as one JSON argument, answers
 * as JSON lines on stdout, each an object with an `event` field. Each measurement runs in a fresh
 * process so its peak RSS is its own and a crash or a time-out loses only that measurement; the
 * Python peers (scripts/*_bench.py, export_onnx.py) speak the same protocol.
 *   ready   the process is set up (what it runs on)
 *   sample  one timed run: { seconds, warmup, label? } — kept even if the process is stopped later
 *   case    one kernel case's result
 *   result  the final figures ({ maxRssKb, ... })
 *   unavailable / error  { reason } / { message }
 */
import type { Arch, ModelSpec } from './specs';

/** Repetition policy: `warmup` untimed runs, then timed runs until `reps` or `budget` seconds (at least one). */
export interface Repeat {
  warmup: number;
  reps: number;
  budget: number;
}

export interface PrepareRequest {
  task: 'prepare';
  spec: ModelSpec;
  /** Where to write the weights (skipped when empty: weights shared with an earlier spec). */
  weightsPath: string;
  inputsPath: string;
}

export interface OursRequest {
  task: 'ours';
  spec: ModelSpec;
  mode: 'infer' | 'train';
  weightsPath: string;
  inputsPath: string;
  /** Inference: where to write the last logits (raw float32), for the peer's agreement check. */
  logitsPath: string | null;
  threads: number;
  repeat: Repeat;
}

export interface OrtRequest {
  task: 'ort';
  arch: Arch;
  onnxPath: string;
  inputsPath: string;
  /** Our logits to compare with (raw float32), when our inference ran. */
  logitsPath: string | null;
  threads: number;
  repeat: Repeat;
}

export interface PeakRequest {
  task: 'peak';
  threads: number;
  minSeconds: number;
}

export interface GemmCase {
  label: string;
  M: number; N: number; K: number;
  /** B stored [N, K] (a Linear layer's x·Wᵀ). */
  transB: boolean;
}

export interface GemmRequest {
  task: 'gemm';
  isa: string;
  threads: number;
  cases: GemmCase[];
  repeat: Repeat;
}

export interface AttentionCase {
  B: number; T: number; D: number; H: number;
}

export interface AttentionRequest {
  task: 'attention';
  isa: string;
  threads: number;
  shape: AttentionCase;
  repeat: Repeat;
}

export interface LayerNormCase {
  label: string;
  rows: number; D: number;
}

export interface LayerNormRequest {
  task: 'layernorm';
  isa: string;
  threads: number;
  cases: LayerNormCase[];
  repeat: Repeat;
}

export type WorkerRequest = PrepareRequest | OursRequest | OrtRequest | PeakRequest | GemmRequest | AttentionRequest | LayerNormRequest;

/** One JSON line from a child process. */
export interface ChildEvent {
  event: string;
  [field: string]: unknown;
}
