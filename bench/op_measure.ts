/**
 * Our side of the operator table, run inside a worker process: each case of op_cases.ts timed
 * through the raw ops of lib/native (the calls our layers make), on the active ISA. Operands hold
 * seeded random values (speed does not depend on them, but denormals or NaNs could). A backward
 * pass is timed after the forward runs, reusing what the last forward saved (our backward ops only
 * read it).
 */
import { native } from '../lib';
import { Random } from '../lib/core/random';
import type { Precision } from '../lib/native/ops.generated';
import type { AttentionCase, AdamWCase, CaseSamples, FeedForwardCase, LayerNormCase, LinearCase, OpCase } from './op_cases';
import type { Repeat } from './protocol';
import { repeat, repeatPaired } from './sampling';

/** n seeded normal values times scale. */
export function randomArray(n: number, rng: Random, scale = 1): Float32Array {
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = scale * rng.normal();
  return a;
}

/** A Linear layer's operands: input, weights (scaled as initialisation scales them), output, gradients. */
function linearOperands(rows: number, inF: number, outF: number, rng: Random) {
  return { x: randomArray(rows * inF, rng), W: randomArray(outF * inF, rng, 1 / Math.sqrt(inF)), b: randomArray(outF, rng, 0.1),
    dy: randomArray(rows * outF, rng), dx: new Float32Array(rows * inF), dW: new Float32Array(outF * inF), db: new Float32Array(outF),
    y: new Float32Array(rows * outF) };
}

/** The three GEMMs of a Linear, as native.linearForward/linearBackward call them: x·Wᵀ, dy·W, dW += dyᵀ·x. */
async function linear(c: LinearCase, r: Repeat): Promise<CaseSamples> {
  const { rows, inFeatures: K, outFeatures: N } = c, o = linearOperands(rows, K, N, new Random(7));
  return {
    forward: await repeat(() => native.gemm({ M: rows, N, K, transB: true, A: o.x, B: o.W, C: o.y }), r),
    dX: await repeat(() => native.gemm({ M: rows, N: K, K: N, A: o.dy, B: o.W, C: o.dx }), r),
    dW: await repeat(() => native.gemm({ M: N, N: K, K: rows, transA: true, beta: 1, A: o.dy, B: o.x, C: o.dW }), r),
  };
}

/**
 * A fused layer op timed in pairs with the Linears it contains (forward, then backward after one
 * forward), so op_rows.ts can take the part that is not GEMM as a paired difference.
 */
async function withLinears(layer: { forward: () => void; backward: () => void }, shapes: [rows: number, inF: number, outF: number][],
  r: Repeat, rng: Random): Promise<CaseSamples> {
  const ops = shapes.map(([rows, inFeatures, outFeatures]) => ({ dims: { rows, inFeatures, outFeatures }, ...linearOperands(rows, inFeatures, outFeatures, rng) }));
  const forward = await repeatPaired(layer.forward, () => ops.forEach((o) => native.linearForward({ ...o.dims, y: o.y, x: o.x, W: o.W, b: o.b })), r);
  const backward = await repeatPaired(layer.backward,
    () => ops.forEach((o) => native.linearBackward({ ...o.dims, dx: o.dx, dW: o.dW, db: o.db, dy: o.dy, x: o.x, W: o.W })), r);
  return { forward: forward.a, linearsForward: forward.b, backward: backward.a, linearsBackward: backward.b };
}

/**
 * A self- or cross-attention layer's operands, drawn from rng, and its forward and backward raw op
 * calls (the backward reads what the last forward saved); precision as the layer's (default fp32).
 * Also bench/ab_worker.ts's attention case.
 */
export function attentionLayer(c: Omit<AttentionCase, 'op' | 'label'>, rng: Random, precision?: Precision): { forward: () => void; backward: () => void } {
  const { B, Tq, Tk, D, H } = c;
  const x = randomArray(B * Tq * D, rng), memory = c.cross ? randomArray(B * Tk * D, rng) : null;
  const w = { qkvWeight: randomArray(3 * D * D, rng, 1 / Math.sqrt(D)), qkvBias: randomArray(3 * D, rng, 0.1),
    projWeight: randomArray(D * D, rng, 1 / Math.sqrt(D)), projBias: randomArray(D, rng, 0.1) };
  const common = { B, Tq, Tk, D, H, causal: c.causal, memory, keyPaddingMask: c.keyPadding ? new Uint8Array(B * Tk) : null,
    ...(precision ? { precision } : {}) };
  const saved = c.cross
    ? { q: new Float32Array(B * Tq * D), kv: new Float32Array(B * Tk * 2 * D), ctx: new Float32Array(B * Tq * D), lse: new Float32Array(B * H * Tq) }
    : { qkv: new Float32Array(B * Tq * 3 * D), ctx: new Float32Array(B * Tq * D), lse: new Float32Array(B * H * Tq) };
  const out = new Float32Array(B * Tq * D), dout = randomArray(B * Tq * D, rng);
  const grads = { dx: new Float32Array(B * Tq * D), dMemory: c.cross ? new Float32Array(B * Tk * D) : null,
    dQkvWeight: new Float32Array(3 * D * D), dQkvBias: new Float32Array(3 * D), dProjWeight: new Float32Array(D * D), dProjBias: new Float32Array(D) };
  return {
    forward: () => native.attentionForward({ ...common, ...w, ...saved, out, x }),
    backward: () => native.attentionBackward({ ...common, ...saved, ...grads, dout, x, qkvWeight: w.qkvWeight, projWeight: w.projWeight }),
  };
}

async function attention(c: AttentionCase, r: Repeat): Promise<CaseSamples> {
  const { B, Tq, Tk, D } = c, rng = new Random(11);
  const layer = attentionLayer(c, rng);
  const projections: [number, number, number][] = c.cross
    ? [[B * Tq, D, D], [B * Tk, D, 2 * D], [B * Tq, D, D]]
    : [[B * Tq, D, 3 * D], [B * Tq, D, D]];
  return withLinears(layer, projections, r, rng);
}

async function feedforward(c: FeedForwardCase, r: Repeat): Promise<CaseSamples> {
  const { rows, D, F } = c, rng = new Random(5);
  const W1 = randomArray(F * D, rng, 1 / Math.sqrt(D)), b1 = randomArray(F, rng, 0.1), W2 = randomArray(D * F, rng, 1 / Math.sqrt(F)), b2 = randomArray(D, rng, 0.1);
  const x = randomArray(rows * D, rng), y = new Float32Array(rows * D), h = new Float32Array(rows * F), a = new Float32Array(rows * F);
  const dy = randomArray(rows * D, rng), dx = new Float32Array(rows * D);
  const grads = { dW1: new Float32Array(F * D), db1: new Float32Array(F), dW2: new Float32Array(D * F), db2: new Float32Array(D) };
  const dims = { rows, D, F, activation: c.activation };
  native.feedforwardForward({ ...dims, y, h, a, x, W1, b1, W2, b2 });  // what backward reads
  return withLinears({
    forward: () => native.feedforwardForward({ ...dims, y, h, a, x, W1, b1, W2, b2 }),
    backward: () => native.feedforwardBackward({ ...dims, ...grads, dx, dy, x, h, a, W1, W2 }),
  }, [[rows, D, F], [rows, F, D]], r, rng);
}

async function layernorm(c: LayerNormCase, r: Repeat): Promise<CaseSamples> {
  const { rows, D } = c, rng = new Random(13);
  const x = randomArray(rows * D, rng), gamma = randomArray(D, rng, 0.1).map((v) => 1 + v), beta = randomArray(D, rng, 0.1);
  const out = new Float32Array(rows * D), mean = new Float32Array(rows), rstd = new Float32Array(rows);
  const dout = randomArray(rows * D, rng), dx = new Float32Array(rows * D), dgamma = new Float32Array(D), dbeta = new Float32Array(D);
  return {
    forward: await repeat(() => native.layernormForward({ rows, D, out, mean, rstd, x, gamma, beta }), r),
    backward: await repeat(() => native.layernormBackward({ rows, D, dx, dgamma, dbeta, dout, x, mean, rstd, gamma }), r),
  };
}

/** One AdamW step over every tensor, one native call per tensor as lib/training/optim.ts makes them. */
async function adamw(c: AdamWCase, r: Repeat): Promise<CaseSamples> {
  const rng = new Random(17);
  const params = c.sizes.map((n) => ({ n, param: randomArray(n, rng, 0.02), grad: randomArray(n, rng, 1e-3),
    expAvg: new Float32Array(n), expAvgSq: new Float32Array(n) }));
  let step = 0;
  return {
    step: await repeat(() => {
      step += 1;
      for (const p of params) native.adamwStep({ ...p, step, lr: 1e-3, weightDecay: 0.01 });
    }, r),
  };
}

/** The seconds of each timed run of each pass of one case. */
export function measureOp(c: OpCase, r: Repeat): Promise<CaseSamples> {
  switch (c.op) {
    case 'linear': return linear(c, r);
    case 'attention': return attention(c, r);
    case 'feedforward': return feedforward(c, r);
    case 'layernorm': return layernorm(c, r);
    case 'adamw': return adamw(c, r);
  }
}
