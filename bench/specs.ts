/**
 * The benchmark's models: architecture, batch and what one step processes. The architecture JSON
 * is what the Python peers receive too (scripts/nf_bench_common.py build_model), so all three
 * implementations build the same model.
 */

/** A ViTClassifier (reference/torch_reference.py ViTClassifier; pre-LN, GELU). */
export interface ViTArch {
  kind: 'vit';
  imgSize: number; patchSize: number; inChannels: number; numClasses: number;
  dModel: number; numHeads: number; dFF: number; depth: number;
}

/** The sequence-to-sequence Transformer (post-LN, ReLU, sinusoidal positions), `depth` encoder and decoder blocks. */
export interface Seq2SeqArch {
  kind: 'seq2seq';
  vocab: number; maxLen: number; dModel: number; numHeads: number; dFF: number; depth: number;
  /** Source and target tokens per sequence. */
  srcLen: number; tgtLen: number;
}

export type Arch = ViTArch | Seq2SeqArch;

export interface ModelSpec {
  /** The name used by --models and in the results. */
  id: string;
  /** A one-line description for the table. */
  title: string;
  arch: Arch;
  batch: number;
}

const vit = (a: Omit<ViTArch, 'kind' | 'inChannels'>): ViTArch => ({ kind: 'vit', inChannels: 3, ...a });

/** Every model the harness knows, in the order it runs them. `tiny` is for smoke tests only. */
export const MODELS: readonly ModelSpec[] = [
  { id: 'seed-cifar', title: 'ViT 32×32/4, D128, depth 4', batch: 64,
    arch: vit({ imgSize: 32, patchSize: 4, numClasses: 10, dModel: 128, numHeads: 4, dFF: 512, depth: 4 }) },
  { id: 'seed-stl10', title: 'ViT 96×96/8, D256, depth 6', batch: 16,
    arch: vit({ imgSize: 96, patchSize: 8, numClasses: 10, dModel: 256, numHeads: 8, dFF: 1024, depth: 6 }) },
  { id: 'vit-b16-b1', title: 'ViT-B/16 224×224', batch: 1,
    arch: vit({ imgSize: 224, patchSize: 16, numClasses: 1000, dModel: 768, numHeads: 12, dFF: 3072, depth: 12 }) },
  { id: 'vit-b16-b8', title: 'ViT-B/16 224×224', batch: 8,
    arch: vit({ imgSize: 224, patchSize: 16, numClasses: 1000, dModel: 768, numHeads: 12, dFF: 3072, depth: 12 }) },
  { id: 'transformer-base', title: 'Transformer base 6+6, V8000, 64+64 tokens', batch: 16,
    arch: { kind: 'seq2seq', vocab: 8000, maxLen: 64, dModel: 512, numHeads: 8, dFF: 2048, depth: 6, srcLen: 64, tgtLen: 64 } },
  { id: 'tiny', title: 'ViT 16×16/4, D32, depth 1 (smoke test)', batch: 4,
    arch: vit({ imgSize: 16, patchSize: 4, numClasses: 10, dModel: 32, numHeads: 2, dFF: 64, depth: 1 }) },
  { id: 'tiny-s2s', title: 'Transformer D32, 1+1, V50 (smoke test)', batch: 2,
    arch: { kind: 'seq2seq', vocab: 50, maxLen: 8, dModel: 32, numHeads: 2, dFF: 64, depth: 1, srcLen: 8, tgtLen: 6 } },
];

/** The models of a default run (all but the smoke tests' tiny ones). */
export const DEFAULT_MODELS = MODELS.filter((m) => !m.id.startsWith('tiny')).map((m) => m.id);

/** Tokens per sequence of a ViT: its patches and the CLS token. */
export function tokensPerSequence(spec: ModelSpec): number {
  const a = spec.arch;
  if (a.kind !== 'vit') throw new Error(`${spec.id} is not a ViT`);
  return (a.imgSize / a.patchSize) ** 2 + 1;
}

/** Images per step for a ViT; source plus target tokens per step for the Transformer. */
export function itemsPerStep(spec: ModelSpec): number {
  const a = spec.arch;
  return a.kind === 'vit' ? spec.batch : spec.batch * (a.srcLen + a.tgtLen);
}

/** The unit of throughput: images or tokens per second. */
export function unit(spec: ModelSpec): 'img/s' | 'tok/s' {
  return spec.arch.kind === 'vit' ? 'img/s' : 'tok/s';
}

/** Architectures that share weights (ViT-B/16 at batch 1 and 8) share one weight file and ONNX export. */
export function archKey(arch: Arch): string {
  return arch.kind === 'vit'
    ? `vit-${arch.imgSize}p${arch.patchSize}c${arch.inChannels}-d${arch.dModel}h${arch.numHeads}f${arch.dFF}x${arch.depth}-k${arch.numClasses}`
    : `s2s-v${arch.vocab}l${arch.maxLen}-d${arch.dModel}h${arch.numHeads}f${arch.dFF}x${arch.depth}`;
}
