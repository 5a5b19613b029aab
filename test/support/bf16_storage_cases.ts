/**
 * The cases of test/bf16_storage.test.ts (the feed-forward and Linear ops on bfloat16 activations),
 * shared with its child test/support/bf16_storage_child.ts. Each case runs the op twice at precision
 * 'bf16': on bf16 storage (Uint16Array activations, the weights' bf16 copies) and on float32 storage
 * holding the same bf16 values, and against the float64 reference twin fed those values. What it
 * returns per case: the largest relative error of each output against the reference, and whether the
 * bf16 outputs are the float32-storage outputs rounded to bf16 bit for bit (and the weight gradients
 * equal), which holds wherever storage changes nothing but the final rounding.
 */
import { native } from '../../lib/native/addon';
import type { Activation } from '../../lib/native/ops.generated';
import type { FeedForwardActivation } from '../../lib/native/feedforward';
import { f64, randn32, relErr, rng, roundBf16 } from '../helpers';

/** Float values → bf16 bits (the kernels' rounding; the values here are bf16 already, so exact). */
export function bits(values: ArrayLike<number>): Uint16Array {
  const out = new Uint16Array(values.length);
  native.castBf16(Float32Array.from(values), out);
  return out;
}
/** bf16 bits → float values (exact). */
export function widen(b: Uint16Array): Float32Array {
  const out = new Float32Array(b.length);
  native.castBf16(b, out);
  return out;
}
const sameBits = (b: Uint16Array, f: Float32Array) => bits(f).every((v, i) => v === b[i]);
const same = (a: Float32Array, b: Float32Array) => a.every((v, i) => Object.is(v, b[i]));
/** n bf16 values, normal-ish with scale s (from a seeded stream). */
const values = (n: number, seed: number, s = 1) => Float32Array.from(randn32(n, rng(seed), s), roundBf16);

export type Result = { errors: Record<string, number>; exact: Record<string, boolean> };

export type FeedForwardCase = { name: string; rows: number; D: number; F: number; activation: FeedForwardActivation; dropout: number;
  /** With a residual input (y = fc2(...) + residual). */
  residual?: boolean };
export const feedForwardCases: FeedForwardCase[] = [
  { name: 'rows 37, D 20, F 52, gelu', rows: 37, D: 20, F: 52, activation: 'gelu', dropout: 0 },
  { name: 'rows 13, D 24, F 40, gelu, residual', rows: 13, D: 24, F: 40, activation: 'gelu', dropout: 0, residual: true },
  { name: 'rows 7, D 12, F 33, silu, dropout 0.1', rows: 7, D: 12, F: 33, activation: 'silu', dropout: 0.1 },
  { name: 'rows 65, D 40, F 72, relu, dropout 0.25', rows: 65, D: 40, F: 72, activation: 'relu', dropout: 0.25 },
  // dW's products cut K = rows into ranges (K >= 4 max(M, N)); whole AMX tiles and k blocks.
  { name: 'rows 1100, D 32, F 128, gelu_tanh (K ranges)', rows: 1100, D: 32, F: 128, activation: 'gelu_tanh', dropout: 0 },
];

export function feedForwardCase(c: FeedForwardCase): Result {
  const { rows, D, F } = c;
  const x = values(rows * D, 1, 2), W1 = values(F * D, 2, 0.3), W2 = values(D * F, 3, 0.3);
  const b1 = Float32Array.from(randn32(F, rng(4))), b2 = Float32Array.from(randn32(D, rng(5))), dy = values(rows * D, 6);
  const r0 = c.residual ? values(rows * D, 7) : null;  // y = fc2(...) + residual
  const dims = { rows, D, F, activation: c.activation, dropout: c.dropout, seed: 9, offset: 3 };
  const at = { ...dims, precision: 'bf16' as const };
  // bf16 storage
  const y16 = new Uint16Array(rows * D), h16 = new Uint16Array(rows * F), a16 = new Uint16Array(rows * F);
  native.feedforwardForward({ ...at, y: y16, h: h16, a: a16, x: bits(x), W1: bits(W1), b1, W2: bits(W2), b2,
    residual: r0 && bits(r0) } as never);
  const g16 = { dx: new Uint16Array(rows * D), dW1: new Float32Array(F * D), db1: new Float32Array(F), dW2: new Float32Array(D * F), db2: new Float32Array(D) };
  native.feedforwardBackward({ ...at, ...g16, dy: bits(dy), x: bits(x), h: h16, a: a16, W1: bits(W1), W2: bits(W2) } as never);
  // float32 storage of the same values (the backward fed the bf16 run's saved h and a)
  const y = new Float32Array(rows * D), h = new Float32Array(rows * F), a = new Float32Array(rows * F);
  native.feedforwardForward({ ...at, y, h, a, x, W1, b1, W2, b2, residual: r0 });
  const g = { dx: new Float32Array(rows * D), dW1: new Float32Array(F * D), db1: new Float32Array(F), dW2: new Float32Array(D * F), db2: new Float32Array(D) };
  native.feedforwardBackward({ ...at, ...g, dy, x, h: widen(h16), a: widen(a16), W1, W2 });
  // the float64 reference on the bf16 values (its backward on the bf16 run's saved h and a as well)
  const r = { y: new Float64Array(rows * D), h: new Float64Array(rows * F), a: new Float64Array(rows * F) };
  native.feedforwardForward({ ...dims, ...r, x: f64(x), W1: f64(W1), b1: f64(b1), W2: f64(W2), b2: f64(b2), residual: r0 && f64(r0) });
  const rg = { dx: new Float64Array(rows * D), dW1: new Float64Array(F * D), db1: new Float64Array(F), dW2: new Float64Array(D * F), db2: new Float64Array(D) };
  native.feedforwardBackward({ ...dims, ...rg, dy: f64(dy), x: f64(x), h: f64(widen(h16)), a: f64(widen(a16)), W1: f64(W1), W2: f64(W2) });
  return {
    errors: { h: relErr(widen(h16), r.h), a: relErr(widen(a16), r.a), y: relErr(widen(y16), r.y), dx: relErr(widen(g16.dx), rg.dx),
      dW1: relErr(g16.dW1, rg.dW1), db1: relErr(g16.db1, rg.db1), dW2: relErr(g16.dW2, rg.dW2), db2: relErr(g16.db2, rg.db2) },
    // Without dropout a is act(h) rounded once either way, so y too (not with a residual: the bf16 y is fc2's
    // output rounded, then the sum rounded again); dW2 and db2 read the same dy and a.
    // (With dropout the bf16 a is rounded before the mask's scaling too; dh is stored rounded, so dW1's and
    // dx's products see the same bf16 dh as the float run's packing, but db1 sums the rounded values.)
    exact: { h: sameBits(h16, h), a: c.dropout > 0 || sameBits(a16, a), y: c.dropout > 0 || c.residual === true || sameBits(y16, y),
      dW2: same(g16.dW2, g.dW2), db2: same(g16.db2, g.db2), dW1: c.dropout > 0 || same(g16.dW1, g.dW1) },
  };
}

export type LinearCase = { name: string; rows: number; inFeatures: number; outFeatures: number; act: Activation; bias: boolean };
export const linearCases: LinearCase[] = [
  { name: 'rows 1, 384 → 128 (one row)', rows: 1, inFeatures: 384, outFeatures: 128, act: 'none', bias: true },
  { name: 'rows 83, 40 → 100, gelu', rows: 83, inFeatures: 40, outFeatures: 100, act: 'gelu', bias: true },
  { name: 'rows 300, 17 → 12, no bias', rows: 300, inFeatures: 17, outFeatures: 12, act: 'none', bias: false },
];

export function linearCase(c: LinearCase): Result {
  const { rows, inFeatures: I, outFeatures: O } = c;
  const x = values(rows * I, 11, 2), W = values(O * I, 12, 0.3), dy = values(rows * O, 13);
  const b = c.bias ? Float32Array.from(randn32(O, rng(14))) : null;
  const dims = { rows, inFeatures: I, outFeatures: O, act: c.act };
  const at = { ...dims, precision: 'bf16' as const };
  const y16 = new Uint16Array(rows * O), p16 = new Uint16Array(rows * O);
  native.linearForward({ ...at, y: y16, preact: p16, x: bits(x), W: bits(W), b } as never);
  const g16 = { dx: new Uint16Array(rows * I), dW: new Float32Array(O * I), db: c.bias ? new Float32Array(O) : null };
  native.linearBackward({ rows, inFeatures: I, outFeatures: O, precision: 'bf16', ...g16, dy: bits(dy), x: bits(x), W: bits(W) } as never);
  const y = new Float32Array(rows * O), p = new Float32Array(rows * O);
  native.linearForward({ ...at, y, preact: p, x, W, b });
  const g = { dx: new Float32Array(rows * I), dW: new Float32Array(O * I), db: c.bias ? new Float32Array(O) : null };
  native.linearBackward({ rows, inFeatures: I, outFeatures: O, precision: 'bf16', ...g, dy, x, W });
  const r = { y: new Float64Array(rows * O), preact: new Float64Array(rows * O) };
  native.linearForward({ ...dims, ...r, x: f64(x), W: f64(W), b: b && f64(b) });
  const rg = { dx: new Float64Array(rows * I), dW: new Float64Array(O * I), db: c.bias ? new Float64Array(O) : null };
  native.linearBackward({ rows, inFeatures: I, outFeatures: O, ...rg, dy: f64(dy), x: f64(x), W: f64(W) });
  return {
    errors: { y: relErr(widen(y16), r.y), preact: relErr(widen(p16), r.preact), dx: relErr(widen(g16.dx), rg.dx),
      dW: relErr(g16.dW, rg.dW), ...(c.bias ? { db: relErr(g16.db!, rg.db!) } : {}) },
    exact: { y: sameBits(y16, y), preact: sameBits(p16, p), dx: sameBits(g16.dx, g.dx), dW: same(g16.dW, g.dW),
      db: !c.bias || same(g16.db!, g.db!) },
  };
}
