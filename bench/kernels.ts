/**
 * Kernel measurements, run inside a worker process on one ISA variant: GEMM, the attention layer
 * (forward and backward, with the memory it needs) and LayerNorm. Operands hold seeded random
 * values (the kernels' speed does not depend on them, but denormals or NaNs could).
 */
import { native } from '../lib';
import { Random } from '../lib/random';
import type { AttentionCase, GemmCase, LayerNormCase, Repeat } from './protocol';
import { repeat } from './sampling';

function randomArray(n: number, rng: Random, scale = 1): Float32Array {
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = scale * rng.normal();
  return a;
}

/** Seconds of each timed run of C = A·op(B) (our Linear's layout when transB). */
export async function gemmSamples(c: GemmCase, r: Repeat): Promise<number[]> {
  const rng = new Random(7);
  const A = randomArray(c.M * c.K, rng), B = randomArray(c.K * c.N, rng), C = new Float32Array(c.M * c.N);
  return repeat(() => native.gemm({ M: c.M, N: c.N, K: c.K, transB: c.transB, A, B, C }), r);
}

/** What the attention measurement reports. */
export interface AttentionFigures {
  forward: number[];
  backward: number[];
  /** Bytes the forward saves for backward (qkv, ctx, lse): O(T). */
  savedBytes: number;
  /** Peak RSS growth while forward and backward ran (transient workspace included), in kB. */
  extraPeakRssKb: number;
}

/**
 * The attention layer (QKV projection, attention core, output projection) of self-attention over
 * B sequences of T tokens: timed forward runs, then timed backward runs from the last forward's
 * saved buffers. Every buffer is allocated and written before the baseline RSS is read, so the
 * RSS growth is the kernels' own workspace.
 */
export async function attentionFigures(s: AttentionCase, r: Repeat): Promise<AttentionFigures> {
  const { B, T, D, H } = s, rng = new Random(11);
  const dims = { B, Tq: T, D, H };
  const w = {
    x: randomArray(B * T * D, rng), qkvWeight: randomArray(3 * D * D, rng, 1 / Math.sqrt(D)),
    qkvBias: randomArray(3 * D, rng, 0.1), projWeight: randomArray(D * D, rng, 1 / Math.sqrt(D)), projBias: randomArray(D, rng, 0.1),
  };
  const saved = { qkv: new Float32Array(B * T * 3 * D), ctx: new Float32Array(B * T * D), lse: new Float32Array(B * H * T) };
  const out = new Float32Array(B * T * D), dout = randomArray(B * T * D, rng);
  const grads = {
    dx: new Float32Array(B * T * D), dQkvWeight: new Float32Array(3 * D * D), dQkvBias: new Float32Array(3 * D),
    dProjWeight: new Float32Array(D * D), dProjBias: new Float32Array(D),
  };
  for (const a of [...Object.values(saved), out, ...Object.values(grads)]) a.fill(0);  // touch every page now
  const before = process.resourceUsage().maxRSS;
  const forward = await repeat(() => native.attentionForward({ ...dims, ...w, ...saved, out }), r);
  const backward = await repeat(() => native.attentionBackward({ ...dims, ...saved, ...grads, dout, x: w.x,
    qkvWeight: w.qkvWeight, projWeight: w.projWeight }), r);
  const savedBytes = 4 * (saved.qkv.length + saved.ctx.length + saved.lse.length);
  return { forward, backward, savedBytes, extraPeakRssKb: Math.max(0, process.resourceUsage().maxRSS - before) };
}

/** Seconds of each timed LayerNorm forward and backward run over rows × D. */
export async function layernormSamples(c: LayerNormCase, r: Repeat): Promise<{ forward: number[]; backward: number[] }> {
  const { rows, D } = c, rng = new Random(13);
  const x = randomArray(rows * D, rng), gamma = randomArray(D, rng, 0.1).map((v) => 1 + v), beta = randomArray(D, rng, 0.1);
  const out = new Float32Array(rows * D), mean = new Float32Array(rows), rstd = new Float32Array(rows);
  const dout = randomArray(rows * D, rng), dx = new Float32Array(rows * D), dgamma = new Float32Array(D), dbeta = new Float32Array(D);
  const forward = await repeat(() => native.layernormForward({ rows, D, out, mean, rstd, x, gamma, beta }), r);
  const backward = await repeat(() => native.layernormBackward({ rows, D, dx, dgamma, dbeta, dout, x, mean, rstd, gamma }), r);
  return { forward, backward };
}
