/**
 * One side of `bench/ab.ts`: loads the addon NF_ADDON_PATH names (or the default one), then answers
 * requests from its parent, one JSON line each on stdin and stdout:
 *   {"case": "<case>", "reps": n}  runs the case n times → {"ms": mean ms a run}
 *   {"peak": true}                  the FMA peak now, as fmaPeak measures it → {"gflops": x}
 * It writes {"ready": true} once loaded. Cases are parsed by ab_cases.ts; their buffers are made on
 * first use (seeded random values, op_measure.ts's) and kept for the later requests.
 */
import * as readline from 'node:readline';

import { native } from '../lib/native/addon';
import { packedSize } from '../lib/core/prepack';
import { Random } from '../lib/core/random';
import { parseCase, type AbCase } from './ab_cases';
import { attentionLayer, randomArray } from './op_measure';

const THREADS = Number(process.env.NF_AB_THREADS ?? 2);
native.setNumThreads(THREADS);

/** A function running the case once, its operands drawn here (op_measure.ts's, as the operator table's). */
function makeRun(c: AbCase): () => void {
  const rng = new Random(11);
  if (c.kind === 'gemm') {
    const { M, N, K } = c;
    const args = { M, N, K, A: randomArray(M * K, rng), B: randomArray(K * N, rng), C: new Float32Array(M * N),
      transA: c.transA, transB: c.transB, act: c.act, precision: c.precision };
    return () => native.gemm(args);
  }
  if (c.kind === 'linear') {  // as a Linear layer runs it: W prepacked once for the precision
    const { M, N, K, precision } = c;
    const W = randomArray(N * K, rng), packed = new Float32Array(packedSize(N, K, precision));
    native.packWeights({ N, K, precision, packed, W });
    const args = { rows: M, inFeatures: K, outFeatures: N, act: c.act, precision, y: new Float32Array(M * N),
      x: randomArray(M * K, rng), W, b: randomArray(N, rng), WPacked: packed };
    return () => native.linearForward(args);
  }
  const layer = attentionLayer({ B: c.B, Tq: c.T, Tk: c.T, D: c.D, H: c.H, cross: false, causal: c.causal, keyPadding: false }, rng, c.precision);
  layer.forward();  // (the backward reads what it saves)
  return c.pass === 'forward' ? layer.forward : layer.backward;
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
