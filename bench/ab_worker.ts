/**
 * One side of `bench/ab.ts`: loads the addon NF_ADDON_PATH names (or the default one), then answers
 * requests from its parent, one JSON line each on stdin and stdout:
 *   {"case": "<case>", "reps": n}  runs the case n times → {"ms": mean ms a run}
 *   {"peak": true}                  the FMA peak now, as fmaPeak measures it → {"gflops": x}
 * It writes {"ready": true} once loaded. Cases are parsed by ab_cases.ts; their buffers are made on
 * first use (random values) and kept for the later requests.
 */
import * as readline from 'node:readline';

import { native } from '../lib/native/addon';
import { parseCase, type AbCase } from './ab_cases';

const THREADS = Number(process.env.NF_AB_THREADS ?? 2);
native.setNumThreads(THREADS);

const random = (n: number, scale: number) => Float32Array.from({ length: n }, () => (Math.random() - 0.5) * scale);

/** A function running the case once, its buffers allocated here. */
function makeRun(c: AbCase): () => void {
  if (c.kind === 'gemm') {
    const { M, N, K } = c;
    const args = { M, N, K, A: random(M * K, 1), B: random(K * N, 1), C: new Float32Array(M * N),
      transA: c.transA, transB: c.transB, act: c.act, precision: c.precision };
    return () => native.gemm(args);
  }
  const { B, T, D, H } = c;
  const x = random(B * T * D, 2), qkvWeight = random(3 * D * D, 0.1), projWeight = random(D * D, 0.1);
  const qkv = new Float32Array(B * T * 3 * D), ctx = new Float32Array(B * T * D), lse = new Float32Array(B * H * T);
  const dims = { B, Tq: T, D, H, causal: c.causal, precision: c.precision };
  const forward = { ...dims, x, qkvWeight, qkvBias: random(3 * D, 1), projWeight, projBias: random(D, 1),
    out: new Float32Array(B * T * D), qkv, ctx, lse };
  native.attentionForward(forward);  // (the backward reads what it saves)
  if (c.pass === 'forward') return () => native.attentionForward(forward);
  const backward = { ...dims, x, qkvWeight, projWeight, qkv, ctx, lse, dout: random(B * T * D, 1),
    dx: new Float32Array(B * T * D), dQkvWeight: new Float32Array(3 * D * D), dQkvBias: new Float32Array(3 * D),
    dProjWeight: new Float32Array(D * D), dProjBias: new Float32Array(D) };
  return () => native.attentionBackward(backward);
}

const runs = new Map<string, () => void>();
const reply = (o: object) => process.stdout.write(`${JSON.stringify(o)}\n`);

readline.createInterface({ input: process.stdin }).on('line', (line) => {
  const q = JSON.parse(line) as { case?: string; reps?: number; peak?: boolean };
  if (q.peak) {
    const out = new Float64Array(3);
    native.fmaPeak({ minSeconds: 0.1, out });
    return reply({ gflops: out[0] / out[1] / 1e9 });
  }
  let run = runs.get(q.case!);
  if (!run) runs.set(q.case!, (run = makeRun(parseCase(q.case!))));
  const t0 = performance.now();
  for (let i = 0; i < q.reps!; i++) run();
  reply({ ms: (performance.now() - t0) / q.reps! });
});
reply({ ready: true });
