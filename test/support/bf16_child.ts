/**
 * Child process of test/cuda_bf16.test.ts (run with tsx, NF_CUDA_BACKEND naming the emulated addon
 * and NF_CUBLASLT_PATH the CPU stand-in for cuBLASLt, which takes CUDA_R_16BF operands as a GPU's
 * does). Prints one JSON line with, for a small ViTClassifier:
 *   - curve: the loss of NF_TEST_STEPS (default 40) AdamW training steps (trainStep, one fixed batch) at
 *     'fp32' on 'cpu' and at 'bf16' on 'cuda' from the same initialisation;
 *   - memory: the device bytes a training forward keeps for its backward (cudaMemoryStats().requestedBytes
 *     after the forward minus before it, the logits included; measured after a first step made every
 *     gradient, the optimizer state and the bf16 weight copies, and an eval forward freed that step's
 *     activations) at 'fp32' and at 'bf16' on 'cuda';
 *   - dtypes: what a bf16 forward returns and what the model keeps (parameters, gradients, the
 *     optimizer's state, stateDict) and the GEMM counters of the bf16 run;
 *   - copiesFresh: after 3 steps at 'bf16' on 'cuda' (AdamW writing the bf16 copies the products read, the
 *     biases' that their epilogues add included), whether an eval forward gives the bits of the same model
 *     loaded from its stateDict into a fresh one (every copy cast anew): false if any copy were stale.
 * The issue's 300-step seed-cifar version is the GPU check's (bench/gpu/bf16_check.ts), not run here.
 */
import { AdamW, Tensor, trainStep, ViTClassifier, type Precision, type ViTClassifierConfig } from '../../lib/index';
import { cuda, cudaMemoryStats } from '../../lib/core/device';
import { randn32, rng } from '../helpers';

const CONFIG: ViTClassifierConfig = {
  imgSize: 12, patchSize: 4, inChannels: 3, dModel: 48, numHeads: 2, dFF: 72, depth: 2, dropout: 0, numClasses: 5, seed: 7,
};
const B = 8;
const steps = Number(process.env.NF_TEST_STEPS ?? 40);
const images = Float32Array.from(randn32(B * 3 * 12 * 12, rng(11)));
const labels = Int32Array.from({ length: B }, (_, i) => (i * 3) % 5);

function setup(device: 'cpu' | 'cuda', precision: Precision) {
  const model = new ViTClassifier({ ...CONFIG, device, precision });
  const opt = new AdamW(model.parameters(), { lr: 2e-3, weightDecay: 0.05 });
  return { model, opt, x: Tensor.from(images, [B, 3, 12, 12], device), t: Tensor.from(labels, [B], device) };
}

function curve(device: 'cpu' | 'cuda', precision: Precision): number[] {
  const { model, opt, x, t } = setup(device, precision);
  const losses = Array.from({ length: steps }, () => trainStep(model, opt, x, t));
  model.dispose();
  return losses;
}

function forwardBytes(precision: Precision) {
  const { model, opt, x, t } = setup('cuda', precision);
  trainStep(model, opt, x, t);
  model.eval().forward(x).dispose(); // (an eval forward frees the last step's activations as it goes)
  model.train();
  const before = cudaMemoryStats().requestedBytes;
  const logits = model.forward(x);
  const bytes = cudaMemoryStats().requestedBytes - before;
  const grads = model.parameters().map((p) => p.grad!.dtype);
  const state = opt.stateDict();
  const out = {
    bytes, logits: logits.dtype, params: [...new Set(model.parameters().map((p) => p.dtype))], grads: [...new Set(grads)],
    stateDict: [...new Set(Object.values(model.stateDict()).map((v) => (v instanceof Tensor ? v.dtype : 'Float32Array')))],
    optimizerState: JSON.stringify(state).includes('bfloat16') ? 'bfloat16 found' : 'float32',
  };
  logits.dispose();
  model.dispose();
  return out;
}

function copiesFresh(): boolean {
  const { model, opt, x, t } = setup('cuda', 'bf16');
  for (let i = 0; i < 3; i++) trainStep(model, opt, x, t);
  const trained = model.eval().forward(x);
  const fresh = new ViTClassifier({ ...CONFIG, device: 'cuda', precision: 'bf16' });
  fresh.loadStateDict(model.stateDict());
  const loaded = fresh.eval().forward(x);
  const a = trained.toArray(), b = loaded.toArray();
  for (const d of [trained, loaded, model, fresh]) d.dispose();
  return a.length === b.length && a.every((v, i) => Object.is(v, b[i]));
}

const before = cuda().backendInfo().gemm.calls;
const bf16 = curve('cuda', 'bf16');
const after = cuda().backendInfo().gemm.calls;
const calls = Object.fromEntries(Object.entries(after).map(([k, v]) => [k, v - before[k as keyof typeof before]]));
const result = {
  curve: { fp32: curve('cpu', 'fp32'), bf16 },
  calls,
  memory: { fp32: forwardBytes('fp32'), bf16: forwardBytes('bf16') },
  copiesFresh: copiesFresh(),
};
console.log(JSON.stringify(result));
