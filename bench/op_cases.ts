/**
 * The operator table's cases: the ops a model's step calls, at that model's shapes. The same JSON
 * goes to our worker (op_measure.ts) and to PyTorch's (scripts/torch_ops_bench.py), and each
 * answers with the seconds of every timed run of each of the case's passes (PASSES).
 *
 * Dimension key: rows = B·T tokens, D model width, F feed-forward width, H heads, Tq/Tk query and
 * key lengths, V vocabulary.
 */
import type { OpFamily } from './cli';
import { tokensPerSequence, type ModelSpec } from './specs';

/** A Linear layer y = x·Wᵀ over `rows` rows: three GEMMs, forward and the two of backward. */
export interface LinearCase {
  op: 'linear'; label: string; rows: number; inFeatures: number; outFeatures: number;
}

/**
 * The attention layer (QKV projection, softmax(QKᵀ/√Dh)·V, output projection): self-attention
 * (Tk = Tq), or cross-attention to Tk memory tokens; causal or not; `keyPadding` passes an
 * all-false padding mask as our model does (PyTorch's model passes none for a batch without padding).
 */
export interface AttentionCase {
  op: 'attention'; label: string; B: number; Tq: number; Tk: number; D: number; H: number;
  cross: boolean; causal: boolean; keyPadding: boolean;
}

/** The feed-forward network fc2(act(fc1(x))). */
export interface FeedForwardCase {
  op: 'feedforward'; rows: number; D: number; F: number; activation: 'gelu' | 'relu';
}

export interface LayerNormCase {
  op: 'layernorm'; rows: number; D: number;
}

/** One AdamW step over parameters of these sizes (each a separate tensor, as in the model). */
export interface AdamWCase {
  op: 'adamw'; sizes: number[];
}

export type OpCase = LinearCase | AttentionCase | FeedForwardCase | LayerNormCase | AdamWCase;

/**
 * The passes each case's answer holds (seconds of each timed run per pass). Attention and
 * feed-forward also answer parts: ours its layer's Linears (`linearsForward`, `linearsBackward`),
 * PyTorch its core op (`coreForward`, `coreBackward`: F.scaled_dot_product_attention, the activation),
 * so the report can set the part inside our fused op against PyTorch's separate op.
 */
export const PASSES = {
  linear: ['forward', 'dX', 'dW'],
  attention: ['forward', 'backward'],
  feedforward: ['forward', 'backward'],
  layernorm: ['forward', 'backward'],
  adamw: ['step'],
} as const satisfies Record<OpFamily, readonly string[]>;

export type CaseSamples = Record<string, number[]>;

/** The sizes of a model's parameter tensors (as in its stateDict, the order aside). */
export function parameterSizes(spec: ModelSpec): number[] {
  const a = spec.arch, D = a.dModel, F = a.dFF;
  const linear = (i: number, o: number) => [o * i, o];
  const attention = () => [...linear(D, 3 * D), ...linear(D, D)];
  const norm = () => [D, D];
  const mlp = () => [...linear(D, F), ...linear(F, D)];
  const repeat = (n: number, block: () => number[]) => Array.from({ length: n }, block).flat();
  if (a.kind === 'vit') {
    const N = (a.imgSize / a.patchSize) ** 2;
    return [D * a.inChannels * a.patchSize ** 2, D, D, (N + 1) * D,
      ...repeat(a.depth, () => [...norm(), ...attention(), ...norm(), ...mlp()]), ...norm(), ...linear(D, a.numClasses)];
  }
  return [a.vocab * D, ...repeat(a.depth, () => [...attention(), ...norm(), ...mlp(), ...norm()]),
    a.vocab * D, ...repeat(a.depth, () => [...attention(), ...norm(), ...attention(), ...norm(), ...mlp(), ...norm()]),
    ...linear(D, a.vocab)];
}

/** The cases of one model, for the requested families, in the order of a step's forward. */
export function opCases(spec: ModelSpec, families: readonly OpFamily[]): OpCase[] {
  const a = spec.arch, B = spec.batch, D = a.dModel, F = a.dFF, H = a.numHeads;
  const out: OpCase[] = [];
  const want = (f: OpFamily) => families.includes(f);
  if (a.kind === 'vit') {
    const T = tokensPerSequence(spec), rows = B * T;
    if (want('layernorm')) out.push({ op: 'layernorm', rows, D });
    if (want('attention')) out.push({ op: 'attention', label: 'self', B, Tq: T, Tk: T, D, H, cross: false, causal: false, keyPadding: false });
    if (want('feedforward')) out.push({ op: 'feedforward', rows, D, F, activation: 'gelu' });
    if (want('linear'))
      out.push({ op: 'linear', label: 'qkv', rows, inFeatures: D, outFeatures: 3 * D }, { op: 'linear', label: 'proj', rows, inFeatures: D, outFeatures: D },
        { op: 'linear', label: 'fc1', rows, inFeatures: D, outFeatures: F }, { op: 'linear', label: 'fc2', rows, inFeatures: F, outFeatures: D });
  } else {
    const S = a.srcLen, T = a.tgtLen;
    if (want('attention'))
      out.push({ op: 'attention', label: 'encoder self', B, Tq: S, Tk: S, D, H, cross: false, causal: false, keyPadding: true },
        { op: 'attention', label: 'decoder causal', B, Tq: T, Tk: T, D, H, cross: false, causal: true, keyPadding: true },
        { op: 'attention', label: 'cross', B, Tq: T, Tk: S, D, H, cross: true, causal: false, keyPadding: true });
    if (want('layernorm')) out.push({ op: 'layernorm', rows: B * T, D });
    if (want('feedforward')) out.push({ op: 'feedforward', rows: B * T, D, F, activation: 'relu' });
    if (want('linear'))
      out.push({ op: 'linear', label: 'qkv', rows: B * T, inFeatures: D, outFeatures: 3 * D }, { op: 'linear', label: 'fc1', rows: B * T, inFeatures: D, outFeatures: F },
        { op: 'linear', label: 'fc2', rows: B * T, inFeatures: F, outFeatures: D }, { op: 'linear', label: 'head', rows: B * T, inFeatures: D, outFeatures: a.vocab });
  }
  if (want('adamw')) out.push({ op: 'adamw', sizes: parameterSizes(spec) });
  return out;
}

/**
 * How many times one training step calls a case as a standalone op (its backward as many times):
 * the Linears inside the attention and feed-forward ops count 0 there (they are part of those
 * ops), the Transformer's vocabulary head 1; AdamW once. Pre-LN ViT: two LayerNorms per block and
 * the final one; post-LN Transformer: two per encoder block, three per decoder block.
 */
export function callsPerStep(spec: ModelSpec, c: OpCase): number {
  const a = spec.arch, L = a.depth, vit = a.kind === 'vit';
  switch (c.op) {
    case 'linear': return c.label === 'head' ? 1 : 0;
    case 'attention': return L;
    case 'feedforward': return vit ? L : 2 * L;
    case 'layernorm': return vit ? 2 * L + 1 : 5 * L;
    case 'adamw': return 1;
  }
}
