/**
 * Child process of test/cuda_attention_precision.test.ts (tsx, NF_CUDA_BACKEND naming the emulated addon,
 * NF_CUDA_ATTENTION_DQ as the case sets it: the backend reads it once per process). A causal
 * MultiHeadAttention with key padding (head width 40, T 70: two key blocks; no attention dropout, which
 * keeps the recompute pass) on 'cuda', forward and backward at
 * each precision of NF_TEST_PRECISIONS; prints one JSON line: per precision the output, dx and the
 * gradients as plain arrays, or the error's code and message (then a second forward must still run:
 * the process and the module stay usable).
 */
import { MultiHeadAttention, Tensor, type Precision } from '../../lib/index';
import { randn32, rng } from '../helpers';

const floats = (shape: number[], seed: number) =>
  Tensor.from(Float32Array.from(randn32(shape.reduce((a, b) => a * b, 1), rng(seed))), shape).to('cuda');

type Outcome = { out: number[]; dx: number[]; grads: Record<string, number[]> } | { code: string; message: string; forwardAfter: boolean };

const results: Record<string, Outcome> = {};
for (const precision of (process.env.NF_TEST_PRECISIONS ?? 'fp32').split(',') as Precision[]) {
  const m = new MultiHeadAttention({ dModel: 80, numHeads: 2, seed: 4, device: 'cuda', precision });
  m.train();
  const x = floats([2, 70, 80], 10), dy = floats([2, 70, 80], 11);
  const mask = Tensor.from(Uint8Array.from({ length: 2 * 70 }, (_, i) => (i >= 70 + 61 ? 1 : 0)), [2, 70]).to('cuda');
  try {
    const out = m.forward(x, { causal: true, keyPaddingMask: mask });
    const dx = m.backward(dy) as Tensor;
    const grads = Object.fromEntries(m.namedParameters().map(([n, p]) => [n, Array.from(p.grad!.toArray())]));
    results[precision] = { out: Array.from(out.toArray()), dx: Array.from(dx.toArray()), grads };
  } catch (e) {
    const { code, message } = e as { code?: unknown; message: string };
    if (typeof code !== 'string' || !code.startsWith('ERR_NF_')) throw e;
    const again = m.forward(x, { causal: true, keyPaddingMask: mask });
    results[precision] = { code, message, forwardAfter: again.shape.join() === '2,70,80' };
  }
  m.dispose();
}
console.log(JSON.stringify(results));
