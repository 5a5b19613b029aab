/**
 * GEMM throughput of the fast kernels: `npx tsx bench/gemm.ts [threads=2] [isa] [precision=fp32] [act=none]`
 * (or `npx vite-node bench/gemm.ts`; isa '' keeps the loaded one). Prints GFLOP/s, the best of several timed runs, for a square
 * case and the GEMMs of the seed ViT (batch 64, 65 tokens, D 128, F 512): forward qkv, fc1, fc2,
 * and the fc2 backward (dx and dW).
 */
import { native } from '../lib/native/addon';
import type { Isa } from '../lib/native/core';
import type { Activation, Precision } from '../lib/native/ops.generated';

type Shape = { name: string; M: number; N: number; K: number; transA?: boolean; transB?: boolean };
const rows = 64 * 65;
const shapes: Shape[] = [
  { name: 'square 1024', M: 1024, N: 1024, K: 1024 },
  { name: 'qkv  x Wᵀ', M: rows, N: 384, K: 128, transB: true },
  { name: 'fc1  x Wᵀ', M: rows, N: 512, K: 128, transB: true },
  { name: 'fc2  x Wᵀ', M: rows, N: 128, K: 512, transB: true },
  { name: 'fc2  dx = dy W', M: rows, N: 512, K: 128 },
  { name: 'fc2  dW = dyᵀ x', M: 128, N: 512, K: rows, transA: true },
];

const threads = Number(process.argv[2] ?? 2);
native.setNumThreads(threads);
if (process.argv[3]) native.setIsa(process.argv[3] as Isa);
const precision = (process.argv[4] ?? 'fp32') as Precision, act = (process.argv[5] ?? 'none') as Activation;
console.log(`isa ${native.isaInfo().active}, ${native.numThreads()} threads, precision ${precision}, act ${act}`);

for (const s of shapes) {
  const A = new Float32Array(s.M * s.K).map(() => Math.random() - 0.5);
  const B = new Float32Array(s.K * s.N).map(() => Math.random() - 0.5);
  const C = new Float32Array(s.M * s.N);
  const run = () => native.gemm({ ...s, A, B, C, precision, act });
  run();
  let best = Infinity;
  for (let rep = 0; rep < 7; rep++) {
    let n = 0;
    const t0 = performance.now();
    do {
      run();
      n++;
    } while (performance.now() - t0 < 150);
    best = Math.min(best, (performance.now() - t0) / n);
  }
  const gflops = (2 * s.M * s.N * s.K) / (best * 1e6);
  const label = `${s.name.padEnd(18)} M=${s.M} N=${s.N} K=${s.K}`;
  console.log(`${label.padEnd(50)}${gflops.toFixed(1).padStart(7)} GFLOP/s`);
}
