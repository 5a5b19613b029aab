/**
 * Shared test utilities: seeded random data, relative error against a float64 reference,
 * running a block under every ISA variant this CPU has, and finite-difference gradient checks.
 */
import { native } from '../lib/native/addon';
import { mulberry32 } from '../lib/core/random';
import type { Isa } from '../lib/native/core';
import type { NodeformerError } from '../lib/validation/errors';

/** A seeded generator (mulberry32) of uniform numbers in [0, 1). */
export const rng = mulberry32;

/** n standard-normal samples (Box-Muller) times `scale`, as float64. */
export function randn(n: number, rand: () => number, scale = 1): Float64Array {
  const out = new Float64Array(n);
  for (let i = 0; i < n; i += 2) {
    const u = 1 - rand(), v = rand();
    const r = Math.sqrt(-2 * Math.log(u));
    out[i] = r * Math.cos(2 * Math.PI * v) * scale;
    if (i + 1 < n) out[i + 1] = r * Math.sin(2 * Math.PI * v) * scale;
  }
  return out;
}

/** Float64 data rounded to float32, and back: the exact inputs both precisions see. */
export function f32(a: ArrayLike<number>): Float32Array {
  return Float32Array.from(a);
}
export function f64(a: ArrayLike<number>): Float64Array {
  return Float64Array.from(a);
}
/** randn rounded to float32 precision but stored as float64, so fast and reference see equal inputs. */
export function randn32(n: number, rand: () => number, scale = 1): Float64Array {
  return f64(f32(randn(n, rand, scale)));
}

/** A float32's bits as an unsigned integer, and back. */
export const bits = (x: number): number => new Uint32Array(Float32Array.of(x).buffer)[0];
export const fromBits = (u: number): number => new Float32Array(Uint32Array.of(u >>> 0).buffer)[0];
/** simd.h's vround_bf16 (vcvtneps2bf16's rule): zero and denormals to signed zero, inf kept, NaN quieted, else to nearest even. */
export function roundBf16(x: number): number {
  const u = bits(x), e = u & 0x7f800000;
  if (e === 0) return fromBits(u & 0x80000000);
  if (e === 0x7f800000) return fromBits((u & 0xffff0000) | (Number.isNaN(x) ? 0x00400000 : 0));
  return fromBits((u + 0x7fff + ((u >>> 16) & 1)) & 0xffff0000);
}

/** ‖got − ref‖₂ / ‖ref‖₂ (absolute ‖got‖ when ref is all zeros). */
export function relErr(got: ArrayLike<number>, ref: ArrayLike<number>): number {
  if (got.length !== ref.length) throw new Error(`length mismatch: ${got.length} vs ${ref.length}`);
  let num = 0, den = 0;
  for (let i = 0; i < ref.length; i++) {
    const d = got[i] - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  return den === 0 ? Math.sqrt(num) : Math.sqrt(num / den);
}

/** The ISA variants this machine can run (the tests run every op under each). */
export const isas: Isa[] = native.isaInfo().available;

/** Runs `fn` with the kernels switched to `isa`, restoring the previous choice afterwards. */
export function withIsa<T>(isa: Isa, fn: () => T): T {
  const before = native.isaInfo().active;
  native.setIsa(isa);
  try {
    return fn();
  } finally {
    native.setIsa(before);
  }
}

/**
 * Central-difference check of an analytic gradient: for `samples` random coordinates i,
 * (f(x + h e_i) − f(x − h e_i)) / 2h against grad[i]. Returns the relative error over them.
 * `x` is modified in place during the check and restored.
 */
export function finiteDiffErr(
  f: () => number, x: Float64Array, grad: ArrayLike<number>, rand: () => number, samples = 24, h = 1e-6,
): number {
  const fd: number[] = [], an: number[] = [];
  const n = Math.min(samples, x.length);
  const picks = n === x.length ? [...x.keys()] : Array.from({ length: n }, () => Math.floor(rand() * x.length));
  for (const i of picks) {
    const x0 = x[i];
    x[i] = x0 + h;
    const fp = f();
    x[i] = x0 - h;
    const fm = f();
    x[i] = x0;
    fd.push((fp - fm) / (2 * h));
    an.push(grad[i]);
  }
  return relErr(an, fd);
}

/** Σ a·b: the scalar loss whose gradient with respect to a is b. */
export function dot(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i] * b[i];
  return s;
}

/** Records the largest error seen per label; printed at the end of a test file. */
export class ErrorLog {
  private worst = new Map<string, number>();
  constructor(private readonly limit: number) {}
  /** Records `err` under `label` and returns it (so expect(...) can test it). */
  add(label: string, err: number): number {
    this.worst.set(label, Math.max(this.worst.get(label) ?? 0, err));
    return err;
  }
  report(title: string): void {
    const rows = [...this.worst].map(([k, v]) => `  ${k.padEnd(40)} ${v.toExponential(2)}`);
    console.log(`${title} (limit ${this.limit.toExponential(0)}):\n${rows.join('\n')}`);
  }
}

/** The NodeformerError that `fn` throws, or null when it returns. */
export function failure(fn: () => unknown): NodeformerError | null {
  try {
    fn();
  } catch (e) {
    return e as NodeformerError;
  }
  return null;
}
