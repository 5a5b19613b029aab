/**
 * The ViTClassifier training step the CUDA tests hold against the CPU (test/cuda_device.test.ts,
 * and test/support/cuda_gemm_child.ts for test/cuda_cublaslt.test.ts): batch 3 of 12×12 RGB images,
 * forward, cross-entropy, backward, AdamW, then a second step through trainStep's program. Returns
 * every output the tests compare: loss, logits, each gradient, each parameter after each step.
 */
import { AdamW, crossEntropy, Tensor, trainStep, ViTClassifier, type ViTClassifierConfig } from '../../lib/index';
import { randn32, rng } from '../helpers';

/** The model both tests train (2 blocks of width 48, 2 heads, 5 classes, no dropout). */
export const STEP_VIT: ViTClassifierConfig = {
  imgSize: 12, patchSize: 4, inChannels: 3, dModel: 48, numHeads: 2, dFF: 72, depth: 2, dropout: 0, numClasses: 5, seed: 7,
};
const B = 3;

/** One training step of a ViTClassifier of `config` (default STEP_VIT) on `device`, then a second through trainStep. */
export function vitTrainingStep(device: 'cpu' | 'cuda', config: ViTClassifierConfig = STEP_VIT) {
  const rand = rng(11);
  const images = Tensor.from(Float32Array.from(randn32(B * 3 * 12 * 12, rand)), [B, 3, 12, 12], device);
  const targets = Tensor.from(Int32Array.from([1, 4, 0]), [B], device);
  const model = new ViTClassifier({ ...config, device });
  // eps 1e-5, not 1e-8: the keys' bias gets a gradient that is 0 in exact arithmetic (softmax
  // ignores a shift shared by all keys), here float noise of ~6e-9 on either device; Adam's first
  // step is ≈ lr·g/(|g| + eps), which with eps 1e-8 turns that noise into ±lr updates whose
  // signs differ between devices (and with 1e-6 still into differences of 1e-4 relative).
  const opt = new AdamW(model.parameters(), { lr: 1e-2, weightDecay: 0.05, eps: 1e-5 });
  opt.zeroGrad();
  const logits = model.forward(images);
  const { loss, grad } = crossEntropy(logits, targets);
  model.backward(grad);
  const grads = Object.fromEntries(model.namedParameters().map(([n, p]) => [n, p.grad!.toArray()]));
  opt.step();
  const params = Object.fromEntries(model.namedParameters().map(([n, p]) => [n, p.toArray()]));
  const loss2 = trainStep(model, opt, images, targets); // the same again through trainStep's program
  const params2 = Object.fromEntries(model.namedParameters().map(([n, p]) => [n, p.toArray()]));
  return { loss, logits: logits.toArray(), grads, params, loss2, params2, devices: model.parameters().map((p) => p.device) };
}
