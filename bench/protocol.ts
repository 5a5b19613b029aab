/**
 * How the harness (run.ts) talks to its child processes: a request as one JSON argument, answers
 * as JSON lines on stdout, each an object with an `event` field. Each measurement runs in a fresh
 * process so its peak RSS is its own and a crash or a time-out loses only that measurement; the
 * Python peers (scripts/*_bench.py, export_onnx.py) speak the same protocol.
 *   ready   the process is set up (what it runs on)
 *   sample  one timed run: { seconds, warmup, label? } — kept even if the process is stopped later
 *   case    one operator case's timed runs: { index, passes: { pass: seconds[] } }
 *   result  the final figures ({ maxRssKb, ... })
 *   unavailable / error  { reason } / { message }
 */
import type { OpCase } from './op_cases';
import type { Mode } from './results';
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
  mode: Mode;
  weightsPath: string;
  inputsPath: string;
  /** Inference: where to write the last logits (raw float32), for the peer's agreement check. */
  logitsPath: string | null;
  threads: number;
  /** native.setThreadSpin's microseconds (variants.ts OURS_VARIANTS). */
  spinUs: number;
  repeat: Repeat;
  /** The model's precision (default: 'int8' in mode 'int8', 'fp32' otherwise; bf16_suite.ts runs 'bf16'). */
  precision?: 'fp32' | 'bf16' | 'int8';
}

export interface OrtRequest {
  task: 'ort';
  arch: Arch;
  onnxPath: string;
  inputsPath: string;
  /** Our logits to compare with (raw float32), when our inference ran. */
  logitsPath: string | null;
  threads: number;
  /** Whether the intra-op threads spin while waiting (variants.ts). */
  spinning: boolean;
  repeat: Repeat;
}

export interface PeakRequest {
  task: 'peak';
  threads: number;
  minSeconds: number;
}

/** The operator table's cases of one model (op_cases.ts), measured one after the other. */
export interface OpsRequest {
  task: 'ops';
  threads: number;
  cases: OpCase[];
  repeat: Repeat;
}

export type WorkerRequest = PrepareRequest | OursRequest | OrtRequest | PeakRequest | OpsRequest;

/** One JSON line from a child process. */
export interface ChildEvent {
  event: string;
  [field: string]: unknown;
}
