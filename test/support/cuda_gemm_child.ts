/**
 * Child process of test/cuda_cublaslt.test.ts (run with tsx from the repository, NF_CUDA_BACKEND
 * naming the emulated addon, and the environment under test: NF_CUBLASLT_PATH naming the CPU
 * stand-in for cuBLASLt, or not). For each feed-forward activation in NF_TEST_ACTIVATIONS (comma
 * separated; none when empty), trains test/support/vit_step.ts's ViTClassifier step (forward,
 * cross-entropy, backward, AdamW, then a second step through trainStep) on 'cuda' and the same on
 * 'cpu', and prints one JSON line: the CUDA addon's GEMM backend info after the steps and the
 * relative error of every output (loss, logits, each gradient, each updated parameter) against the CPU.
 */
import type { Activation } from '../../lib/index';
import { cuda } from '../../lib/core/device';
import { relErr } from '../helpers';
import { STEP_VIT, vitTrainingStep } from './vit_step';

const step = (device: 'cpu' | 'cuda', activation: Activation) => vitTrainingStep(device, { ...STEP_VIT, activation });

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
