/**
 * The parity suite (ggml's test-backend-ops): it walks the op table the addon exports (opSchema(),
 * native/ops/*.h) and runs every op, forward and backward, on every ISA variant of the CPU kernels
 * (scalar, AVX2, AVX-512: those this CPU runs) and on the CUDA kernels compiled for the SIMT emulator
 * (where build/cuda-emu builds), against the float64 reference twin: relative error < 1e-5 for
 * forward outputs and < 1e-4 for gradients. The reference's own gradients are checked against finite
 * differences of its forward. The ops that run matrix products at a `precision` run again at 'bf16' on
 * every variant against the same (exact) float64 reference with bf16's own tolerances, < 1e-2 forward
 * and < 3e-2 for gradients (an input rounded to bf16 moves by up to 2^-9 relative, a product of two by
 * about 2^-8); and the avx512bf16 variant's bf16 products (vdpbf16ps, or AMX-BF16 tiles where the CPU
 * has them) against the emulation of the same rounding in avx512, which differ only in the order of
 * fp32 sums (< 1e-6; the attention backward < 1e-4, where that order can round an element of dS to
 * its neighbouring bf16 value: see bf16AttentionPaths).
 *
 * What each op needs beyond its schema lives in `families` below: the dims of a few awkward cases
 * (odd T, head widths 6, 12, 20, 40, widths that are no multiple of a vector), which optional fields
 * to give, and how to draw inputs that must be valid (ids, targets, masks). Everything else comes from
 * the schema: the arrays to allocate (their shapes, evaluated with the case's dims), which are inputs
 * (random), outputs (compared), accumulated (random start, compared), saved by a forward for its
 * backward (passed on by name), and which backward field is the gradient of which input (the
 * finite-difference checks). An op added to the table without a family here fails the first test.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { native } from '../lib/native/addon';
import { dot, ErrorLog, finiteDiffErr, isas, randn32, relErr, rng, withIsa } from './helpers';
import { buildEmulated, emulatorSkipReason, root } from './support/cuda_emu_build';

type Field = {
  name: string; kind: string; role?: 'in' | 'out' | 'inout' | 'saved'; dtype?: 'real' | 'f64' | 'i32' | 'u8';
  shape?: string; optional?: boolean; when?: string | null; gradOf?: string | null;
};
type OpSchema = { name: string; fields: Field[]; reference: boolean };
type Arr = Float64Array | Float32Array | Int32Array | Uint8Array;
type Scalars = Record<string, number | boolean | string>;
type Rand = () => number;

const schema = new Map((JSON.parse(native.opSchema()) as OpSchema[]).map((o) => [o.name, o]));

interface Case {
  label: string;
  /** The dims, numbers, flags and choices of the call (both ops of a family take the same). */
  args: Scalars;
  /** Optional or conditional arrays to give (the others are left out). */
  give?: string[];
  /** Names a shape uses that are no field (N of the patch embedding), and defaults of integer fields. */
  extra?: Record<string, number>;
  /** Lengths that the shape text does not give (a batched attnMask). */
  len?: Record<string, number>;
  /** Whether the finite-difference check runs on this case (not across a ReLU kink). */
  fd?: boolean;
  /** Backward fields taken from a forward field of another name (layernorm with a residual: x ← sum). */
  link?: Record<string, string>;
}

interface Family {
  forward: string;
  backward?: string;
  cases: Case[];
  /** Inputs that must be valid (ids, targets, masks) or need a scale: name → (length, rand, case) → values. */
  values?: Record<string, (n: number, r: Rand, c: Case) => Arr>;
  /** A fused loss: the finite differences are of this output (loss[0]), not of Σ dout·out. */
  loss?: string;
  /** How many of the cases also run on the CUDA emulator (slow: it runs threads one by one). */
  cuda?: number;
}

const mask = (p: number) => (n: number, r: Rand) => Uint8Array.from({ length: n }, () => (r() < p ? 1 : 0));
const scaled = (s: number) => (n: number, r: Rand) => randn32(n, r, s);
const positive = (n: number, r: Rand) => Float64Array.from(randn32(n, r, 0.1), Math.abs);
/** A step-value table of seeds (integers, as a step's are). */
const stepTable = (n: number) => Float64Array.from({ length: n }, (_, i) => 1000 + 17 * i);

const families: Family[] = [
  {
    forward: 'layernormForward', backward: 'layernormBackward',
    values: { x: scaled(2) },
    cases: [
      { label: 'rows 1, D 24', args: { rows: 1, D: 24 } },
      { label: 'rows 7, D 72, residual', args: { rows: 7, D: 72 }, give: ['residual', 'sum'], link: { x: 'sum' } },
      { label: 'rows 65, D 96, dadd', args: { rows: 65, D: 96, eps: 1e-3 }, give: ['dadd'], fd: false }, // dadd: a gradient from elsewhere
      { label: 'rows 985, D 40, residual and dadd', args: { rows: 985, D: 40 }, give: ['residual', 'sum', 'dadd'], link: { x: 'sum' }, fd: false },
      { label: 'rows 3, D 1', args: { rows: 3, D: 1 }, fd: false },
    ],
  },
  {
    forward: 'gemm',
    values: { A: scaled(0.6), B: scaled(0.6) },
    cases: [
      { label: '13 x 37 x 19, transA, gelu_tanh, alpha, beta, bias, preact', args: { M: 13, N: 37, K: 19, transA: true, act: 'gelu_tanh', alpha: 0.75, beta: 0.5 }, give: ['bias', 'preact'] },
      { label: 'batch 2 of 7 x 5 x 12, transB, relu', args: { M: 7, N: 5, K: 12, batch: 2, transB: true, act: 'relu' }, extra: { batch: 2 } },
      { label: '1 x 1 x 1', args: { M: 1, N: 1, K: 1 } },
      { label: '33 x 40 x 65, both transposed, gelu', args: { M: 33, N: 40, K: 65, transA: true, transB: true, act: 'gelu' }, give: ['bias'] },
      { label: '9 x 70 x 17, silu, preact', args: { M: 9, N: 70, K: 17, act: 'silu' }, give: ['bias', 'preact'] },
    ],
  },
  {
    // The layout of the active variant (its NR), against the reference's definition of it; the
    // products that read a packing are compared bit for bit with those that do not in test/prepack.test.ts.
    forward: 'packWeights',
    cases: [
      { label: 'N 20, K 12', args: { N: 20, K: 12 } },
      { label: 'N 40, K 300 (two k blocks)', args: { N: 40, K: 300 } },
      { label: 'N 100, K 513 (three k blocks)', args: { N: 100, K: 513 } },
      { label: 'N 1, K 1', args: { N: 1, K: 1 } },
    ],
  },
  {
    forward: 'linearForward', backward: 'linearBackward',
    cases: [
      { label: 'rows 5, 13 → 7, bias', args: { rows: 5, inFeatures: 13, outFeatures: 7 }, give: ['b', 'db', 'dx'] },
      { label: 'rows 1, 40 → 12, no bias, no dx', args: { rows: 1, inFeatures: 40, outFeatures: 12 } },
      { label: 'rows 33, 20 → 59, gelu, preact', args: { rows: 33, inFeatures: 20, outFeatures: 59, act: 'gelu' }, give: ['b', 'db', 'dx', 'preact'], fd: false },
      { label: 'rows 985, 96 → 72, gelu_tanh', args: { rows: 985, inFeatures: 96, outFeatures: 72, act: 'gelu_tanh' }, give: ['b', 'db', 'dx'], fd: false },
      { label: 'rows 300, 1 → 1, relu', args: { rows: 300, inFeatures: 1, outFeatures: 1, act: 'relu' }, give: ['b', 'db', 'dx'], fd: false },
    ],
  },
  {
    forward: 'feedforwardForward', backward: 'feedforwardBackward', cuda: 4,
    values: { W1: scaled(0.3), W2: scaled(0.3), stepValues: stepTable },
    cases: [
      { label: 'rows 1, D 24, F 72, gelu', args: { rows: 1, D: 24, F: 72, activation: 'gelu' }, give: ['h'] },
      { label: 'rows 13, D 40, F 36, gelu, residual', args: { rows: 13, D: 40, F: 36, activation: 'gelu' }, give: ['h', 'residual'] },
      { label: 'rows 7, D 40, F 20, gelu_tanh, dropout 0.1', args: { rows: 7, D: 40, F: 20, activation: 'gelu_tanh', dropout: 0.1, seed: 9, offset: 4 }, give: ['h'] },
      { label: 'rows 30, D 12, F 48, relu', args: { rows: 30, D: 12, F: 48, activation: 'relu' }, give: ['h'], fd: false },
      { label: 'rows 9, D 20, F 33, silu, dropout 0.2', args: { rows: 9, D: 20, F: 33, activation: 'silu', dropout: 0.2, seed: 2, offset: 5 }, give: ['h'] },
      { label: 'rows 5, D 8, F 16, gelu, dropout 0.3, the seed from stepValues', args: { rows: 5, D: 8, F: 16, activation: 'gelu', dropout: 0.3, seed: 2, seedAt: 1 },
        give: ['h', 'stepValues'], len: { stepValues: 2 } },
    ],
  },
  {
    forward: 'attentionForward', backward: 'attentionBackward', cuda: 6,
    values: {
      qkvWeight: (n, r, c) => randn32(n, r, 1 / Math.sqrt(Number(c.args.D))),
      projWeight: (n, r, c) => randn32(n, r, 1 / Math.sqrt(Number(c.args.D))),
      qkvBias: scaled(0.5), projBias: scaled(0.5), keyPaddingMask: mask(0.25), attnMask: mask(0.2),
    },
    cases: [
      { label: 'B 2, T 7, D 24, H 4 (head width 6)', args: { B: 2, Tq: 7, D: 24, H: 4 }, give: ['qkv', 'qkvBias', 'projBias', 'dQkvBias', 'dProjBias'] },
      { label: 'B 1, T 9, D 40, H 2 (head width 20), causal, dropout, weights', args: { B: 1, Tq: 9, D: 40, H: 2, causal: true, dropoutP: 0.1, seed: 3, offset: 1 }, give: ['qkv', 'weights'] },
      {
        label: 'cross, B 2, Tq 5, Tk 7, D 24, H 2 (head width 12), key padding, a batched attnMask',
        args: { B: 2, Tq: 5, Tk: 7, D: 24, H: 2 }, len: { attnMask: 2 * 5 * 7 },
        give: ['memory', 'q', 'kv', 'dMemory', 'keyPaddingMask', 'attnMask', 'qkvBias', 'dQkvBias'],
      },
      { label: 'B 1, T 3, D 80, H 2 (head width 40)', args: { B: 1, Tq: 3, D: 80, H: 2 }, give: ['qkv', 'projBias', 'dProjBias'] },
      {
        label: 'B 2, T 5, D 24, H 3 (head width 8), scale 0.5 (a head of width 4 padded to 8), causal, key padding',
        args: { B: 2, Tq: 5, D: 24, H: 3, scale: 0.5, causal: true }, give: ['qkv', 'keyPaddingMask', 'qkvBias', 'dQkvBias'],
      },
      {
        label: 'cross, B 1, Tq 4, Tk 6, D 20, H 4 (head width 5), scale 0.7',
        args: { B: 1, Tq: 4, Tk: 6, D: 20, H: 4, scale: 0.7 }, give: ['memory', 'q', 'kv', 'dMemory', 'projBias', 'dProjBias'],
      },
      {
        label: 'B 1, T 97, D 21, H 3 (head width 7), key padding, weights: two key tiles of the online softmax (its rescale)',
        args: { B: 1, Tq: 97, D: 21, H: 3 }, give: ['qkv', 'keyPaddingMask', 'weights'],
      },
      {
        label: 'B 1, T 37, D 200, H 2 (head width 100), causal: query blocks of 20 and 17 rows, 7 column tiles on AMX',
        args: { B: 1, Tq: 37, D: 200, H: 2, causal: true }, give: ['qkv', 'qkvBias', 'dQkvBias'], fd: false,
      },
      {
        label: 'B 2, T 83, D 64, H 2 (head width 32: whole 16-column tiles), key padding: two key tiles, three query blocks',
        args: { B: 2, Tq: 83, D: 64, H: 2 }, give: ['qkv', 'keyPaddingMask', 'projBias', 'dProjBias'], fd: false,
      },
    ],
  },
  {
    forward: 'patchEmbedForward', backward: 'patchEmbedBackward',
    values: { weight: scaled(0.3) },
    cases: [
      { label: 'one 4x4 image, one patch, D 24', args: { B: 1, C: 1, H: 4, W: 4, P: 4, D: 24 }, extra: { N: 1 }, give: ['dimages'] },
      { label: '3 images 3x12x8, patches 4, D 40', args: { B: 3, C: 3, H: 12, W: 8, P: 4, D: 40 }, extra: { N: 6 } },
      { label: '2 images 2x6x6, patches 3, D 7', args: { B: 2, C: 2, H: 6, W: 6, P: 3, D: 7 }, extra: { N: 4 }, give: ['dimages'] },
    ],
  },
  {
    forward: 'embeddingForward', backward: 'embeddingBackward',
    values: { ids: (n, _r, c) => Int32Array.from({ length: n }, (_, i) => (i * i * 7 + 3) % Number(c.args.V)) },
    cases: [
      { label: 'B 2, T 7, V 5 (repeated ids), D 24, scale 8, positions of 9 rows', args: { B: 2, T: 7, V: 5, D: 24, scale: 8, maxLen: 9 }, give: ['pos', 'dpos'] },
      { label: 'B 3, T 5, V 300, D 7', args: { B: 3, T: 5, V: 300, D: 7 }, extra: { maxLen: 5 } },
    ],
  },
  {
    forward: 'sinusoidalEncoding',
    cases: [{ label: 'len 7, D 12', args: { len: 7, D: 12 } }, { label: 'len 3, D 5 (odd)', args: { len: 3, D: 5 } }],
  },
  {
    forward: 'clsPosForward', backward: 'clsPosBackward',
    cases: [{ label: 'B 2, N 9, D 12', args: { B: 2, N: 9, D: 12 } }, { label: 'B 1, N 1, D 7', args: { B: 1, N: 1, D: 7 } }],
  },
  {
    forward: 'tokenPosForward', backward: 'tokenPosBackward',
    cases: [{ label: 'B 3, N 4, D 10', args: { B: 3, N: 4, D: 10 } }],
  },
  { forward: 'add', cases: [{ label: 'n 1000', args: { n: 1000 } }, { label: 'n 1', args: { n: 1 } }] },
  { forward: 'accumulate', cases: [{ label: 'n 37', args: { n: 37 } }] },
  {
    forward: 'dropoutForward', backward: 'dropoutBackward', values: { stepValues: stepTable },
    cases: [
      { label: 'n 257, p 0.3', args: { n: 257, p: 0.3, seed: 5, offset: 2 } }, { label: 'n 3, p 0', args: { n: 3, p: 0, seed: 0, offset: 0 } },
      { label: 'n 100, p 0.5, the seed from stepValues', args: { n: 100, p: 0.5, seed: 5, offset: 1, seedAt: 2 }, give: ['stepValues'], len: { stepValues: 3 } },
    ],
  },
  {
    forward: 'copyRows',
    cases: [{ label: '3 rows of 5, strides 8 and 12, offsets 2 and 1', args: { rows: 3, cols: 5, dstStride: 8, srcStride: 12, dstOffset: 2, srcOffset: 1 } }],
  },
  {
    forward: 'crossEntropy', loss: 'loss',
    values: { logits: scaled(3), targets: (n, _r, c) => Int32Array.from({ length: n }, (_, i) => (i === 2 ? -100 : (i * 5 + 1) % Number(c.args.V))) },
    cases: [
      { label: 'N 7, V 13, an ignored row', args: { N: 7, V: 13 }, give: ['dlogits'] },
      { label: 'N 4, V 37, label smoothing, gradScale 2', args: { N: 4, V: 37, labelSmoothing: 0.1, gradScale: 2 }, give: ['dlogits'], fd: false },
    ],
  },
  {
    forward: 'mse', loss: 'loss',
    values: { mask: (n) => Uint8Array.from({ length: n }, (_, i) => (i % 3 === 1 ? 0 : 1)) },
    cases: [
      { label: 'rows 5, cols 7, a mask', args: { rows: 5, cols: 7 }, give: ['dpred', 'mask'] },
      { label: 'rows 9, cols 3', args: { rows: 9, cols: 3 }, give: ['dpred'] },
    ],
  },
  {
    forward: 'adamwStep', values: { expAvgSq: positive, stepValues: () => Float64Array.from([7, 0.02]) },
    cases: [
      { label: 'n 37, step 3', args: { n: 37, step: 3, lr: 0.01 } },
      { label: 'n 37, step 7 and lr 0.02 from stepValues', args: { n: 37, step: 3, lr: 0.01, stepAt: 0, lrAt: 1 }, give: ['stepValues'], len: { stepValues: 2 } },
    ],
  },
  {
    forward: 'sgdStep',
    cases: [
      { label: 'n 37, step 2, momentum, weight decay', args: { n: 37, step: 2, lr: 0.1, momentum: 0.9, weightDecay: 0.01 }, give: ['momentumBuf'] },
      { label: 'n 10, step 1, nesterov', args: { n: 10, step: 1, lr: 0.1, momentum: 0.5, nesterov: true }, give: ['momentumBuf'] },
    ],
  },
  { forward: 'sumSquares', cases: [{ label: 'n 1000', args: { n: 1000 } }] },
  {
    forward: 'zero',
    values: { x: (n, r) => Float64Array.from(randn32(n, r), (v, i) => (i === 5 ? NaN : i === 6 ? -Infinity : v)) },
    cases: [{ label: 'n 1000, a NaN and an infinity', args: { n: 1000 } }],
  },
  {
    forward: 'softmax', cuda: 3,
    values: { x: (n, r) => Float64Array.from(randn32(n, r, 4), (v, i) => (i === 3 ? -Infinity : v)) },
    cases: [
      { label: 'rows 5, cols 37, a -inf logit', args: { rows: 5, cols: 37 } },
      { label: 'rows 3, cols 1000', args: { rows: 3, cols: 1000 } },
      { label: 'rows 1, cols 1', args: { rows: 1, cols: 1 } },
    ],
  },
  {
    forward: 'logSoftmax', cuda: 3,
    values: { x: (n, r) => Float64Array.from(randn32(n, r, 4), (v, i) => (i === 3 ? -Infinity : i === 7 ? v + 1e4 : v)) },
    cases: [
      { label: 'rows 5, cols 37, a -inf logit and one of 1e4', args: { rows: 5, cols: 37 } },
      { label: 'rows 3, cols 1030', args: { rows: 3, cols: 1030 } },
      { label: 'rows 2, cols 1', args: { rows: 2, cols: 1 } },
    ],
  },
  {
    forward: 'argmax', cuda: 3,
    // Ties (values drawn from 5 levels), a NaN in row 1: the first index of the largest, NaN largest.
    values: { x: (n, r) => Float64Array.from({ length: n }, (_, i) => (i === 60 ? NaN : Math.floor(r() * 5))) },
    cases: [
      { label: 'rows 4, cols 50, ties and a NaN', args: { rows: 4, cols: 50 } },
      { label: 'rows 3, cols 1000, ties', args: { rows: 3, cols: 1000 } },
      { label: 'rows 2, cols 1', args: { rows: 2, cols: 1 } },
    ],
  },
  {
    forward: 'topk', cuda: 3,
    values: { x: (n, r) => Float64Array.from({ length: n }, (_, i) => (i === 60 ? NaN : i % 7 === 0 ? 0.5 : randn32(1, r)[0])) },
    cases: [
      { label: 'rows 4, cols 50, k 9, ties and a NaN', args: { rows: 4, cols: 50, k: 9 } },
      { label: 'rows 3, cols 700, k 40', args: { rows: 3, cols: 700, k: 40 } },
      { label: 'rows 2, cols 5, k 5 (the whole row)', args: { rows: 2, cols: 5, k: 5 } },
    ],
  },
  {
    forward: 'activationForward', backward: 'activationBackward', values: { x: scaled(2) },
    cases: [{ label: 'n 1000, tanh', args: { n: 1000, act: 'tanh' } }, { label: 'n 37, gelu_tanh', args: { n: 37, act: 'gelu_tanh' } },
      { label: 'n 1001, gelu', args: { n: 1001, act: 'gelu' } }],
  },
  {
    forward: 'channelScaleForward', backward: 'channelScaleBackward',
    cases: [{ label: 'rows 985, cols 70', args: { rows: 985, cols: 70 }, give: ['dx'] }, { label: 'rows 3, cols 7, no dx', args: { rows: 3, cols: 7 } }],
  },
  { forward: 'scale', cases: [{ label: 'n 100, s -0.5', args: { n: 100, s: -0.5 } }] },
  { forward: 'clipGradNorm', cases: [{ label: 'n 50, max norm 1 (clipped)', args: { n: 50, maxNorm: 1 } }] },
  { forward: 'clipCoefficient', values: { sums: positive }, cases: [{ label: 'n 30, max norm 0.5', args: { n: 30, maxNorm: 0.5 } }] },
  { forward: 'clipScale', values: { coef: () => Float64Array.from([0.37]) }, cases: [{ label: 'n 100, coef 0.37', args: { n: 100 } }] },
  {
    forward: 'firstNonFinite',
    values: { x: (n, r) => Float64Array.from(randn32(n, r), (v, i) => (i === 37 ? NaN : v)) },
    cases: [{ label: 'n 100, a NaN at 37', args: { n: 100 } }],
  },
];

/** Ops the suite leaves to their own tests, and why. */
const elsewhere: Record<string, string> = {
  attentionDecode: 'float32 only, no reference twin: test/attention.test.ts compares it with the full forward',
  fmaPeak: 'a measurement, not a function of its inputs (test/peak.test.ts)',
  adamwMultiStep: 'a tensor-list op (this suite walks single arrays): test/optim_multi.test.ts compares it with the float64 twin and adamwStep',
};

// ---- evaluating the schema for a case --------------------------------------------------------

/** The element count of a field's shape ("[B, Tq, 3 * D]", the first of "[..] or [..]"). */
function length(op: string, f: Field, c: Case): number {
  if (c.len?.[f.name] !== undefined) return c.len[f.name];
  const inner = /^\[([^\]]*)\]/.exec(f.shape!)?.[1];
  if (inner === undefined) throw new Error(`${op}.${f.name}: cannot read shape ${f.shape}`);
  const env: Record<string, number> = { ...c.extra };
  for (const [k, v] of Object.entries(c.args)) if (typeof v === 'number') env[k] = v;
  env.Tk ??= env.Tq; // the integer fields' defaults
  env.maxLen ??= env.T;
  env.batch ??= 1;
  for (const g of schema.get(op)!.fields) if (env[g.name] === undefined && g.kind === 'integer') env[g.name] = 0;
  return inner.split(',').reduce((n, e) => {
    const expr = e.replace(/·/g, '*').replace(/−/g, '-').replace(/⌈([^⌉]*)⌉/g, 'Math.ceil($1)');
    const value = new Function(...Object.keys(env), `return (${expr});`)(...Object.values(env)) as number;
    if (!Number.isInteger(value)) throw new Error(`${op}.${f.name}: ${expr} is not a dim of case ${c.label}`);
    return n * value;
  }, 1);
}

/** The arrays of `op` this case passes: the required ones and those it gives. */
function arrays(op: string, c: Case): Field[] {
  return schema.get(op)!.fields.filter((f) => f.kind === 'array' && ((!f.optional && !f.when) || c.give?.includes(f.name)));
}

type Values = Map<string, Arr>;

/** Float64 inputs (rounded to float32) for every array the family reads that no forward writes. */
function inputs(fam: Family, c: Case, seed: number): Values {
  const r = rng(seed), v: Values = new Map();
  const written = new Set(arrays(fam.forward, c).filter((f) => f.role === 'out' || f.role === 'saved').map((f) => f.name));
  for (const op of [fam.forward, fam.backward].filter(Boolean) as string[])
    for (const f of arrays(op, c)) {
      if (v.has(f.name) || (op === fam.backward && (written.has(f.name) || c.link?.[f.name]))) continue;
      if (f.role === 'out' || (f.role === 'saved' && op === fam.forward)) continue;
      const n = length(op, f, c);
      const make = fam.values?.[f.name];
      v.set(f.name, make ? make(n, r, c) : f.dtype === 'u8' ? mask(0.3)(n, r) : f.dtype === 'i32' ? new Int32Array(n) : randn32(n, r));
    }
  return v;
}

/** Runs `op` once in the given precision; returns every array it wrote (outputs, updated, saved). */
type Runner = (op: string, args: Record<string, unknown>, written: string[]) => Values;

function call(run: Runner, precision: 'f32' | 'f64', op: string, c: Case, given: Values, zeroGrads = false): Values {
  const args: Record<string, unknown> = { ...c.args };
  const written: string[] = [];
  for (const f of arrays(op, c)) {
    const n = length(op, f, c);
    const src = given.get(f.name);
    if (f.role !== 'in' && f.role !== 'inout' && !(f.role === 'saved' && /Backward$/.test(op))) written.push(f.name);
    if (f.role === 'inout') written.push(f.name);
    let a: Arr;
    if (f.dtype === 'real') {
      a = precision === 'f32' ? new Float32Array(n) : new Float64Array(n);
      if (src && !(zeroGrads && f.gradOf && f.role === 'inout')) (a as Float64Array).set(src as Float64Array);
    } else {
      a = f.dtype === 'f64' ? new Float64Array(n) : f.dtype === 'i32' ? new Int32Array(n) : new Uint8Array(n);
      if (src) a.set(src as never);
    }
    if (src && src.length !== n) throw new Error(`${op}.${f.name}: ${src.length} values for ${n}`);
    args[f.name] = a;
  }
  return run(op, args, written);
}

const cpu: Runner = (op, args, written) => {
  (native as unknown as Record<string, (a: object) => void>)[op](args);
  return new Map(written.map((w) => [w, args[w] as Arr]));
};

/**
 * Forward, then backward fed with the forward's outputs and saved buffers and the shared inputs
 * (or with `saved`: another run's forward outputs).
 */
function family(run: Runner, precision: 'f32' | 'f64', fam: Family, c: Case, given: Values, zeroGrads = false, saved?: Values) {
  const fwd = call(run, precision, fam.forward, c, given, zeroGrads);
  if (!fam.backward) return { fwd, bwd: new Map() as Values };
  const pass: Values = new Map([...given, ...(saved ?? fwd)]);
  for (const [to, from] of Object.entries(c.link ?? {})) pass.set(to, pass.get(from)!);
  return { fwd, bwd: call(run, precision, fam.backward, c, pass, zeroGrads) };
}

// ---- comparing -------------------------------------------------------------------------------

/** A precision's tolerances (forward outputs, gradients) and the logs reporting the largest errors. */
interface Tolerance { fwd: number; bwd: number; fwdLog: ErrorLog; bwdLog: ErrorLog }
const tolerance = (fwd: number, bwd: number): Tolerance => ({ fwd, bwd, fwdLog: new ErrorLog(fwd), bwdLog: new ErrorLog(bwd) });
const fp32 = tolerance(1e-5, 1e-4), bf16 = tolerance(1e-2, 3e-2), bf16Paths = tolerance(1e-6, 1e-6);
// The attention backward's paths differ by more than the order of sums alone: it rounds scale dS =
// scale P ∘ (dP − Di) to bf16, where dP − Di cancels, so a dP one ulp apart (dO Vᵀ summed in another
// order) can round an element of dS to the neighbouring bf16 value. Measured at 'B 2, T 83, D 64, H 2':
// dx 3.0e-5 apart with vdpbf16ps, 4.1e-5 on AMX tiles (the other cases within 1e-6). Its forward keeps 1e-6.
const bf16AttentionPaths = tolerance(1e-6, 1e-4);
const fdLog = new ErrorLog(1e-5);
afterAll(() => {
  fp32.fwdLog.report('op table parity, forward outputs, largest relative error');
  fp32.bwdLog.report('op table parity, gradients, largest relative error');
  bf16.fwdLog.report('op table parity at bf16, forward outputs, largest relative error');
  bf16.bwdLog.report('op table parity at bf16, gradients, largest relative error');
  bf16Paths.fwdLog.report('bf16: avx512bf16 (vdpbf16ps) against avx512 (emulated), forward outputs');
  bf16Paths.bwdLog.report('bf16: avx512bf16 (vdpbf16ps) against avx512 (emulated), gradients');
  bf16AttentionPaths.fwdLog.report('bf16: avx512bf16 (vdpbf16ps) against avx512 (emulated), attention forward outputs');
  bf16AttentionPaths.bwdLog.report('bf16: avx512bf16 (vdpbf16ps) against avx512 (emulated), attention gradients');
  fdLog.report('reference gradients against finite differences, largest relative error');
});

/** ‖got − ref‖ / ‖ref‖ where -Infinity (an lse of a fully blocked row) must match and is left out. */
function err(label: string, got: Arr, ref: Arr): number {
  const g = Array.from(got), r = Array.from(ref);
  for (let i = 0; i < r.length; i++)
    if (r[i] === -Infinity || Number.isNaN(r[i])) {
      expect(Object.is(g[i], r[i]), `${label}[${i}]`).toBe(true);
      g[i] = r[i] = 0;
    }
  return relErr(g, r);
}

function compare(where: string, fam: Family, got: ReturnType<typeof family>, ref: ReturnType<typeof family>, tol = fp32) {
  for (const [side, op] of [['fwd', fam.forward], ['bwd', fam.backward]] as const) {
    if (!op) continue;
    const fields = new Map(schema.get(op)!.fields.map((f) => [f.name, f]));
    for (const [name, r] of ref[side]) {
      const isGrad = side === 'bwd' || !!fields.get(name)?.gradOf;
      const log = isGrad ? tol.bwdLog : tol.fwdLog;
      const e = log.add(`${op}.${name} ${where}`, err(`${op}.${name}`, got[side].get(name)!, r));
      expect(e, `${op}.${name} (${where})`).toBeLessThan(isGrad ? tol.bwd : tol.fwd);
    }
  }
}

// ---- the suite -------------------------------------------------------------------------------

describe('the op table', () => {
  it('has a parity family (or a stated reason) for every op, and every family is in the table', () => {
    const covered = new Set(families.flatMap((f) => [f.forward, f.backward].filter(Boolean) as string[]));
    for (const op of schema.keys()) expect(covered.has(op) || op in elsewhere, `no parity family for ${op}`).toBe(true);
    for (const op of covered) expect(schema.has(op), `${op} is not in the op table`).toBe(true);
  });
});

describe.each(isas)('op table parity with the float64 reference (%s)', (isa) => {
  for (const fam of families)
    it.each(fam.cases)(`${fam.forward}${fam.backward ? ` / ${fam.backward}` : ''}: $label`, (c) => {
      const given = inputs(fam, c, c.label.length * 131 + fam.forward.length);
      // (Under the variant too: packWeights's layout, the reference's included, is the variant's.)
      const ref = withIsa(isa, () => family(cpu, 'f64', fam, c, given));
      const got = withIsa(isa, () => family(cpu, 'f32', fam, c, given));
      compare(isa, fam, got, ref);
    });
});

/**
 * The families whose ops run matrix products at a `precision`, with that field at 'bf16' (packWeights
 * aside: its bf16 packing is held to the products that read it, test/prepack_ops.test.ts).
 */
const atBf16 = families.filter((f) => f.forward !== 'packWeights' && schema.get(f.forward)!.fields.some((x) => x.name === 'precision'))
  .map((f) => ({ ...f, cases: f.cases.map((c) => ({ ...c, args: { ...c.args, precision: 'bf16' } })) }));

describe.each(isas)('op table parity at precision bf16 with the float64 reference (%s)', (isa) => {
  for (const fam of atBf16)
    it.each(fam.cases)(`${fam.forward}${fam.backward ? ` / ${fam.backward}` : ''}: $label`, (c) => {
      const given = inputs(fam, c, c.label.length * 131 + fam.forward.length);
      const ref = family(cpu, 'f64', fam, c, given); // the exact products: the reference has no bf16
      compare(`${isa} bf16`, fam, withIsa(isa, () => family(cpu, 'f32', fam, c, given)), ref, bf16);
    });
});

describe.runIf(isas.includes('avx512') && isas.includes('avx512bf16'))('bf16: vdpbf16ps (avx512bf16) against the emulation (avx512)', () => {
  for (const fam of atBf16)
    it.each(fam.cases)(`${fam.forward}${fam.backward ? ` / ${fam.backward}` : ''}: $label`, (c) => {
      const given = inputs(fam, c, c.label.length * 131 + fam.forward.length);
      const emulated = withIsa('avx512', () => family(cpu, 'f32', fam, c, given));
      // Both backwards read the emulation's forward outputs: the attention backward's Di = rowsum(dO ∘ O)
      // cancels in dS = P ∘ (dP − Di), so an O one ulp off (the forward's sums in another order) moves
      // dx by ~1e-5 relative at these small shapes, however close the backward's own products are.
      const paired = withIsa('avx512bf16', () => family(cpu, 'f32', fam, c, given, false, emulated.fwd));
      compare('avx512bf16 against avx512', fam, paired, emulated, fam.backward === 'attentionBackward' ? bf16AttentionPaths : bf16Paths);
    });
});

describe('the reference gradients against finite differences of the reference forward', () => {
  for (const fam of families.filter((f) => f.backward || f.loss))
    it.each(fam.cases.filter((c) => c.fd !== false))(`${fam.forward}: $label`, (c) => {
      const r = rng(17);
      const given = inputs(fam, c, 29);
      const { fwd, bwd } = family(cpu, 'f64', fam, c, given, true);
      const gradOp = schema.get(fam.backward ?? fam.forward)!;
      const grads = gradOp.fields.filter((f) => f.gradOf && (fam.backward ? bwd : fwd).has(f.name));
      // The scalar whose gradients the backward computes: Σ_o dout_o · out_o, or the fused loss.
      const seeds = fam.backward ? gradOp.fields.filter((f) => f.gradOf && fwd.has(f.gradOf) && given.has(f.name)) : [];
      const loss = () => {
        const out = call(cpu, 'f64', fam.forward, c, given, true);
        return fam.loss ? out.get(fam.loss)![0] : seeds.reduce((s, f) => s + dot(out.get(f.gradOf!)!, given.get(f.name)!), 0);
      };
      let checked = 0;
      for (const f of grads) {
        const x = given.get(f.gradOf!);
        if (!(x instanceof Float64Array) || fwd.has(f.gradOf!)) continue; // an input the forward reads
        const e = fdLog.add(`${fam.forward} d${f.gradOf}`, finiteDiffErr(loss, x, (fam.backward ? bwd : fwd).get(f.name)!, r, 12));
        expect(e, `${gradOp.name}.${f.name} against finite differences (${c.label})`).toBeLessThan(1e-5);
        checked++;
      }
      expect(checked, 'gradients checked').toBeGreaterThan(0);
    });
});

// ---- the CUDA kernels on the SIMT emulator ----------------------------------------------------

type CudaAddon = Record<string, (...a: never[]) => unknown> & {
  alloc(bytes: number): object; free(b: object): void; upload(dst: object, src: Arr): void;
  download(dst: Arr, src: object): void; opSchema(): string;
};

const skip = emulatorSkipReason();
if (skip) console.log(`op table parity on the CUDA emulator skipped: ${skip}`);

describe.skipIf(skip !== null)('op table parity with the float64 reference (CUDA kernels on the SIMT emulator)', () => {
  let addon: CudaAddon;
  let onDevice = new Set<string>();
  beforeAll(async () => {
    const build = await buildEmulated();
    expect(build.ok, build.out).toBe(true);
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    addon = require(`${root}/build/cuda-emu/emulated/nodeformer_cuda.node`) as CudaAddon;
    onDevice = new Set((JSON.parse(addon.opSchema()) as { name: string }[]).map((o) => o.name));
  }, 900_000);

  /** Runs an op with every array in a device buffer (uploaded, then the written ones downloaded). */
  const device: Runner = (op, args, written) => {
    const bufs = new Map<string, object>();
    const devArgs: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(args)) {
      if (!ArrayBuffer.isView(v)) {
        devArgs[k] = v;
        continue;
      }
      const a = v as Arr;
      const b = addon.alloc(a.byteLength);
      addon.upload(b, a);
      bufs.set(k, b);
      devArgs[k] = b;
    }
    (addon[op] as unknown as (a: object) => void)(devArgs);
    const out: Values = new Map();
    for (const w of written) {
      const host = args[w] as Arr;
      addon.download(host, bufs.get(w)!);
      out.set(w, host);
    }
    for (const b of bufs.values()) addon.free(b);
    return out;
  };

  for (const fam of families)
    it.each(fam.cases.slice(0, fam.cuda ?? 2))(`${fam.forward}${fam.backward ? ` / ${fam.backward}` : ''}: $label`, (c) => {
      const ops = [fam.forward, fam.backward].filter(Boolean) as string[];
      if (!ops.every((op) => onDevice.has(op))) {
        console.log(`no CUDA kernel for ${ops.filter((op) => !onDevice.has(op)).join(', ')}: skipped on the emulator`);
        return;
      }
      const given = inputs(fam, c, c.label.length * 131 + fam.forward.length);
      compare('cuda-emulator', fam, family(device, 'f32', fam, c, given), family(cpu, 'f64', fam, c, given));
    }, 120_000);
});
