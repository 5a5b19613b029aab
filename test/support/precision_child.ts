/**
 * Child process of test/precision.test.ts (run with tsx from the repository, NF_CUDA_BACKEND naming
 * the emulated addon and NF_CUBLASLT_PATH the CPU stand-in for cuBLASLt, which rounds the products'
 * inputs as the compute mode says). For each precision in NF_TEST_PRECISIONS (comma separated), runs
 * one ViTClassifier forward and backward (cross-entropy) on 'cuda' at that precision and the same
 * model at 'fp32' on 'cpu', and prints one JSON line: per precision, the relative error of the loss,
 * the logits, every parameter gradient and all gradients together against the CPU, and the increase
 * of the GEMM counters (cuda().backendInfo().gemm.calls) over that step.
 */
import { crossEntropy, Tensor, ViTClassifier, type Precision } from '../../lib/index';
import { cuda } from '../../lib/core/device';
import { randn32, relErr, rng } from '../helpers';

const B = 3;
const base = { imgSize: 12, patchSize: 4, inChannels: 3, dModel: 48, numHeads: 2, dFF: 72, depth: 2, dropout: 0, numClasses: 5, seed: 7 };

function step(device: 'cpu' | 'cuda', precision: Precision) {
  const images = Tensor.from(Float32Array.from(randn32(B * 3 * 12 * 12, rng(11))), [B, 3, 12, 12]);
  const targets = Tensor.from(Int32Array.from([1, 4, 0]), [B]);
  const model = new ViTClassifier({ ...base, device, precision });
  const logits = model.forward(images.to(device));
  const { loss, grad } = crossEntropy(logits, targets.to(device));
  model.backward(grad);
  const grads = Object.fromEntries(model.namedParameters().map(([n, p]) => [n, p.grad!.toArray()]));
  const out = { precision: model.precision, loss, logits: logits.toArray(), grads };
  model.dispose();
  return out;
}

const concat = (arrays: Float32Array[]) => Float32Array.from(arrays.flatMap((a) => [...a]));
const results: Record<string, { precision: string; errors: Record<string, number>; calls: Record<string, number> }> = {};
const ref = step('cpu', 'fp32');
for (const precision of (process.env.NF_TEST_PRECISIONS ?? '').split(',').filter(Boolean) as Precision[]) {
  const before = cuda().backendInfo().gemm.calls;
  const got = step('cuda', precision);
  const after = cuda().backendInfo().gemm.calls;
  const calls = Object.fromEntries(Object.entries(after).map(([k, v]) => [k, v - before[k as keyof typeof before]]));
  const errors: Record<string, number> = { loss: relErr([got.loss], [ref.loss]), logits: relErr(got.logits, ref.logits) };
  const names = Object.keys(ref.grads);
  for (const name of names) errors[`grad ${name}`] = relErr(got.grads[name], ref.grads[name]);
  errors['all gradients'] = relErr(concat(names.map((n) => got.grads[n])), concat(names.map((n) => ref.grads[n])));
  results[precision] = { precision: got.precision, errors, calls };
}
console.log(JSON.stringify({ gemm: cuda().backendInfo().gemm, results }));
