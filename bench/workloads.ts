/**
 * Our side of the model benchmarks: building a benchmark model, its deterministic inputs, and one
 * inference or training step (zero_grad, forward, cross-entropy, backward, AdamW: the same step
 * as scripts/torch_train_bench.py).
 */
import {
  AdamW, crossEntropy, loadSafetensors, saveSafetensors, Tensor, Transformer, ViTClassifier,
} from '../lib';
import { Random } from '../lib/core/random';
import type { Arch, ModelSpec } from './specs';

export type BenchModel = ViTClassifier | Transformer;

/** The model of `arch` with seed-0 initialisation (weights are then loaded from the shared file). */
export function buildModel(arch: Arch): BenchModel {
  const common = { dModel: arch.dModel, numHeads: arch.numHeads, dFF: arch.dFF, depth: arch.depth, seed: 0 };
  return arch.kind === 'vit'
    ? new ViTClassifier({ imgSize: arch.imgSize, patchSize: arch.patchSize, inChannels: arch.inChannels, numClasses: arch.numClasses, ...common })
    : new Transformer({ srcVocab: arch.vocab, tgtVocab: arch.vocab, maxLen: arch.maxLen, padIdx: 0, ...common });
}

/** Images (or source and target tokens) and labels. Token ids avoid 0, the padding id. */
export type Inputs = Record<'images' | 'src' | 'tgt' | 'labels', Tensor | undefined>;

/** The batch's inputs, the same on every run (fixed seed); written once and read by every implementation. */
export function makeInputs(spec: ModelSpec): Record<string, Tensor> {
  const a = spec.arch, B = spec.batch, rng = new Random(1234);
  const ids = (n: number, high: number) => Int32Array.from({ length: n }, () => 1 + (rng.u32() % (high - 1)));
  if (a.kind === 'vit') {
    const images = Float32Array.from({ length: B * a.inChannels * a.imgSize ** 2 }, () => rng.normal());
    return {
      images: Tensor.from(images, [B, a.inChannels, a.imgSize, a.imgSize]),
      labels: Tensor.from(Int32Array.from({ length: B }, () => rng.u32() % a.numClasses), [B]),
    };
  }
  return {
    src: Tensor.from(ids(B * a.srcLen, a.vocab), [B, a.srcLen]),
    tgt: Tensor.from(ids(B * a.tgtLen, a.vocab), [B, a.tgtLen]),
    labels: Tensor.from(ids(B * a.tgtLen, a.vocab), [B, a.tgtLen]),
  };
}

/** Builds the model and saves its weights and the inputs (the files every implementation reads). */
export function prepare(spec: ModelSpec, weightsPath: string, inputsPath: string): void {
  if (weightsPath) {
    const model = buildModel(spec.arch);
    saveSafetensors(weightsPath, model.stateDict(), { arch: JSON.stringify(spec.arch) });
    model.dispose();
  }
  saveSafetensors(inputsPath, makeInputs(spec));
}

/** The model with the weights of `weightsPath` (strict: every name and shape must match). */
export function loadModel(arch: Arch, weightsPath: string): BenchModel {
  const model = buildModel(arch), weights = loadSafetensors(weightsPath);
  model.loadStateDict(weights);
  for (const t of Object.values(weights)) t.dispose();
  return model;
}

export function loadInputs(inputsPath: string): Inputs {
  const t = loadSafetensors(inputsPath);
  return { images: t.images, src: t.src, tgt: t.tgt, labels: t.labels };
}

function logitsOf(model: BenchModel, x: Inputs): Tensor<'float32'> {
  return model instanceof ViTClassifier ? model.forward(x.images!) : model.forward(x.src!, x.tgt!);
}

/** One inference step (eval mode, at `precision`): returns the logits. */
export function inferenceStep(model: BenchModel, x: Inputs, precision: 'fp32' | 'bf16' | 'int8' = 'fp32'): () => Tensor<'float32'> {
  model.setPrecision(precision).eval();
  return () => logitsOf(model, x);
}

/** One training step at `precision` ('fp32' or 'bf16'; 'int8' is inference only); returns the loss (computed before the update). */
export function trainingStep(model: BenchModel, x: Inputs, precision: 'fp32' | 'bf16' | 'int8' = 'fp32'): () => number {
  model.setPrecision(precision).train();
  const opt = new AdamW(model.parameters(), { lr: 1e-3, weightDecay: 0.01 });
  return () => {
    opt.zeroGrad();
    const logits = logitsOf(model, x);
    const { loss, grad } = crossEntropy(logits, x.labels!);
    logits.dispose();
    const dInputs: unknown = model.backward(grad); // a ViT's image gradient (a Transformer's tokens have none)
    if (dInputs instanceof Tensor) dInputs.dispose();
    grad.dispose();
    opt.step();
    return loss;
  };
}
