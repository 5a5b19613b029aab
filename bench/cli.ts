/** The harness's command line: `npm run bench -- [options]` (see HELP). */
import { parseArgs } from 'node:util';

import type { Mode } from './results';
import { DEFAULT_MODELS, MODELS } from './specs';

export const OP_FAMILIES = ['linear', 'attention', 'feedforward', 'layernorm', 'adamw'] as const;
export type OpFamily = (typeof OP_FAMILIES)[number];
export const PEERS = ['ort', 'torch'] as const;
export type Peer = (typeof PEERS)[number];

export interface Options {
  models: string[];
  modes: Mode[];
  /** The operator table's families (at every requested model's shapes). */
  ops: OpFamily[];
  peers: Peer[];
  /** Override every model's batch size. */
  batch: number | null;
  threads: number;
  warmup: number;
  reps: number;
  /** Seconds of timed runs after which a measurement stops (it always gets one). */
  budget: number;
  /** Times each measurement (ours, then each peer) is repeated, alternating; samples pooled. */
  rounds: number;
  /** Wall-clock limit of one measurement process (ours or a peer's) and of the ONNX export. */
  timeout: number;
  quick: boolean;
  /** The bf16 rows (bf16_suite.ts) of every requested model and mode. */
  bf16: boolean;
  out: string;
  cacheDir: string;
}

export const HELP = `npm run bench -- [options]

Measures nodeformer against onnxruntime-node and PyTorch 2.x eager on the same weights, inputs,
batch and threads: every model's inference (ours, onnxruntime-node, PyTorch under
torch.inference_mode()) and training step (ours, PyTorch: forward, cross-entropy, backward,
AdamW); then an operator table at each model's shapes (GEMMs forward and backward, attention
against F.scaled_dot_product_attention, feed-forward and its activation, LayerNorm, AdamW), ours
against PyTorch's; then issue 12's targets judged from the run. Ours and each peer run with their
threads spinning and sleeping (bench/variants.ts) and the faster stands for each. PyTorch comes from
NF_BENCH_PYTHON or the project's .venv-bench (\`npm run bench:setup\` creates it).

  --models a,b     ${MODELS.map((m) => m.id).join(', ')} (default: all but the tiny ones)
  --modes a,b      infer, int8 (inference at precision 'int8' against onnxruntime's own quantize_dynamic
                   int8 export), train (default: all three)
  --ops a,b        ${OP_FAMILIES.join(', ')}, all or none (default: all)
  --peers a,b      ${PEERS.join(', ')}, all or none (default: all)
  --batch N        override every model's batch size
  --threads N      threads for us and every peer (default 2)
  --warmup N       untimed runs before timing (default 1)
  --reps N         timed runs per measurement, at most (default 5)
  --budget S       stop a model measurement after S seconds of timed runs, keeping at least one
                   (default 15; an operator's pass gets a quarter of it, at most 2 s)
  --rounds N       measure each model (and each model's operators) N times, ours and the peers
                   alternating, and pool the timed runs: on a shared machine this spreads a slow
                   spell over every side (default 1)
  --timeout S      wall-clock limit of one measurement process (ours or a peer's); one stopped
                   there reports the runs it finished, or a lower bound on its run time (default 120)
  --no-bf16        skip the bf16 rows: ours at precision 'bf16' against ours at 'fp32' and PyTorch
                   under torch.autocast('cpu', bfloat16), each model and mode (issue 25's target)
  --quick          a CI-sized run: seed-cifar at batch 16 (unless --models is given), 2 timed runs
                   (explicit options still apply)
  --out FILE       the JSON results (default bench/results/<date>.json)
  --cache-dir DIR  weights, inputs and ONNX exports, reused across runs (default bench/.cache)
  --help

Environment: NF_BENCH_PYTHON (a Python with PyTorch, onnx and numpy; default .venv-bench/bin/python).`;

function list<T extends string>(name: string, value: string, allowed: readonly T[], all: readonly T[] = allowed): T[] {
  if (value === 'all') return [...all];
  if (value === 'none') return [];
  const items = value.split(',').map((s) => s.trim()).filter(Boolean);
  for (const item of items)
    if (!allowed.includes(item as T)) throw new Error(`Expected one of ${allowed.join(', ')} for --${name} but received ${item}`);
  return items as T[];
}

function number(name: string, value: string | undefined, fallback: number, min: number, integer = true): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isFinite(n) || n < min || (integer && !Number.isInteger(n)))
    throw new Error(`Expected ${integer ? 'an integer' : 'a number'} >= ${min} for --${name} but received ${value}`);
  return n;
}

/** Parses argv (without node and the script); throws with a clear message on a bad option. */
export function parseOptions(argv: readonly string[]): Options | 'help' {
  const { values: v } = parseArgs({
    args: [...argv], strict: true, allowPositionals: false,
    options: {
      models: { type: 'string' }, modes: { type: 'string' }, ops: { type: 'string' }, peers: { type: 'string' },
      batch: { type: 'string' }, threads: { type: 'string' }, warmup: { type: 'string' }, reps: { type: 'string' },
      budget: { type: 'string' }, rounds: { type: 'string' }, timeout: { type: 'string' }, quick: { type: 'boolean' }, 'no-bf16': { type: 'boolean' },
      out: { type: 'string' }, 'cache-dir': { type: 'string' }, help: { type: 'boolean' },
    },
  });
  if (v.help) return 'help';
  const quick = v.quick ?? false;
  const ids = MODELS.map((m) => m.id);
  const date = new Date().toISOString().replace(/:/g, '-').replace(/\..*/, '');
  return {
    models: list('models', v.models ?? (quick ? 'seed-cifar' : DEFAULT_MODELS.join(',')), ids, DEFAULT_MODELS),
    modes: list('modes', v.modes ?? 'all', ['infer', 'int8', 'train'] as const),
    ops: list('ops', v.ops ?? 'all', OP_FAMILIES),
    peers: list('peers', v.peers ?? 'all', PEERS),
    batch: v.batch === undefined ? (quick && v.models === undefined ? 16 : null) : number('batch', v.batch, 1, 1),
    threads: number('threads', v.threads, 2, 1),
    warmup: number('warmup', v.warmup, 1, 0),
    reps: number('reps', v.reps, quick ? 2 : 5, 1),
    budget: number('budget', v.budget, quick ? 2 : 15, 0, false),
    rounds: number('rounds', v.rounds, 1, 1),
    timeout: number('timeout', v.timeout, quick ? 60 : 120, 1, false),
    quick,
    bf16: !v['no-bf16'],
    out: v.out ?? `bench/results/${date}.json`,
    cacheDir: v['cache-dir'] ?? 'bench/.cache',
  };
}
