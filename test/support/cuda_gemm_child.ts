/**
 * Child process of test/cuda_cublaslt.test.ts (run with tsx from the repository, NF_CUDA_BACKEND
 * naming the emulated addon, and the environment under test: NF_CUBLASLT_PATH naming the CPU
 * stand-in for cuBLASLt, or not). For each feed-forward activation in NF_TEST_ACTIVATIONS (comma
 * separated; none when empty), trains one ViTClassifier step (forward, cross-entropy, backward,
 * AdamW, then a second step through trainStep) on 'cuda' and the same on 'cpu', and prints one JSON
 * line: the CUDA addon's GEMM backend info after the steps and the relative error of every output
 * (loss, logits, each gradient, each updated parameter) against the CPU.
 */
import { AdamW, crossEntropy, Tensor, trainStep, ViTClassifier } from '../../lib/index';
import type { Activation } from '../../lib/index';
import { cuda } from '../../lib/core/device';
import { randn32, relErr, rng } from '../helpers';

const B = 3;
const base = { imgSize: 12, patchSize: 4, inChannels: 3, dModel: 48, numHeads: 2, dFF: 72, depth: 2, dropout: 0, numClasses: 5, seed: 7 };

function step(device: 'cpu' | 'cuda', activation: Activation) {
  const rand = rng(11);
  const images = Tensor.from(Float32Array.from(randn32(B * 3 * 12 * 12, rand)), [B, 3, 12, 12]);
  const targets = Tensor.from(Int32Array.from([1, 4, 0]), [B]);
  const model = new ViTClassifier({ ...base, activation, device });
  // eps 1e-5 (as test/cuda_device.test.ts): the keys' bias gets a gradient that is 0 in exact
  // arithmetic, float noise on either device, which Adam's first step would otherwise amplify.
  const opt = new AdamW(model.parameters(), { lr: 1e-2, weightDecay: 0.05, eps: 1e-5 });
  const x = images.to(device), t = targets.to(device);
  opt.zeroGrad();
  const logits = model.forward(x);
  const { loss, grad } = crossEntropy(logits, t);
  model.backward(grad);
  const grads = Object.fromEntries(model.namedParameters().map(([n, p]) => [n, p.grad!.toArray()]));
  opt.step();
  const params = Object.fromEntries(model.namedParameters().map(([n, p]) => [n, p.toArray()]));
  const loss2 = trainStep(model, opt, x, t);
  const params2 = Object.fromEntries(model.namedParameters().map(([n, p]) => [n, p.toArray()]));
  return { loss, logits: logits.toArray(), grads, params, loss2, params2 };
}

const errors: Record<string, number> = {};
for (const activation of (process.env.NF_TEST_ACTIVATIONS ?? '').split(',').filter(Boolean) as Activation[]) {
  const ref = step('cpu', activation), got = step('cuda', activation);
  errors[`${activation} loss`] = relErr([got.loss], [ref.loss]);
  errors[`${activation} logits`] = relErr(got.logits, ref.logits);
  errors[`${activation} step 2 loss`] = relErr([got.loss2], [ref.loss2]);
  for (const name of Object.keys(ref.grads)) {
    errors[`${activation} grad ${name}`] = relErr(got.grads[name], ref.grads[name]);
    errors[`${activation} updated ${name}`] = relErr(got.params[name], ref.params[name]);
    errors[`${activation} step 2 ${name}`] = relErr(got.params2[name], ref.params2[name]);
  }
}
console.log(JSON.stringify({ info: cuda().backendInfo(), errors }));
