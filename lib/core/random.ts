import { invalidArg } from '../validation/errors';

/**
 * Seeded random numbers for initialisation and dropout seeds: xoshiro128** (uniform) with
 * Box-Muller normals. Same seed, same numbers, on every platform.
 */
export class Random {
  private s: Uint32Array;
  private spare: number | null = null;

  constructor(seed: number) {
    // splitmix32 expands the seed into the 128-bit state.
    let x = seed >>> 0;
    const next = () => {
      x = (x + 0x9e3779b9) >>> 0;
      let z = x;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
      return (z ^ (z >>> 16)) >>> 0;
    };
    this.s = new Uint32Array([next(), next(), next(), next()]);
  }

  /** A uniform 32-bit unsigned integer. */
  u32(): number {
    const s = this.s;
    const result = Math.imul(rotl(Math.imul(s[1], 5), 7), 9) >>> 0;
    const t = s[1] << 9;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 11);
    return result;
  }

  /** Uniform in [0, 1). */
  uniform(): number {
    return this.seed() / 9007199254740992;
  }

  /** Standard normal. */
  normal(): number {
    if (this.spare !== null) {
      const v = this.spare;
      this.spare = null;
      return v;
    }
    const u = 1 - this.uniform(), v = this.uniform();
    const r = Math.sqrt(-2 * Math.log(u));
    this.spare = r * Math.sin(2 * Math.PI * v);
    return r * Math.cos(2 * Math.PI * v);
  }

  /** n values uniform in [lo, hi). */
  uniformArray(n: number, lo: number, hi: number): Float32Array {
    const out = new Float32Array(n);
    for (let i = 0; i < n; i++) out[i] = lo + (hi - lo) * this.uniform();
    return out;
  }

  /** n values normal with the given standard deviation. */
  normalArray(n: number, std: number): Float32Array {
    const out = new Float32Array(n);
    for (let i = 0; i < n; i++) out[i] = this.normal() * std;
    return out;
  }

  /** The generator's state (for checkpoints): four 32-bit words and the spare normal (or null). */
  getState(): { s: number[]; spare: number | null } {
    return { s: Array.from(this.s), spare: this.spare };
  }

  /** Restores a getState() result. */
  setState(state: { s: number[]; spare: number | null }): void {
    const ok = state && Array.isArray(state.s) && state.s.length === 4 &&
      state.s.every((w) => Number.isInteger(w) && w >= 0 && w <= 0xffffffff) &&
      (state.spare === null || typeof state.spare === 'number');
    if (!ok) invalidArg('state', 'a Random state {s: four 32-bit words, spare: number | null}', state);
    this.s.set(state.s);
    this.spare = state.spare;
  }

  /** A 53-bit integer seed for a sub-stream (e.g. one module's dropout). */
  seed(): number {
    return this.u32() * 2097152 + (this.u32() >>> 11);
  }
}

function rotl(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0;
}

/** A 32-bit PRNG (mulberry32): the same sequence on every rank and platform. */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
