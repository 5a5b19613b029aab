/**
 * The SIMD vocabulary (native/cpu/simd.h) and every other ISA-specific helper (activation_inl.h,
 * pack_inl.h, the finite scan), on every variant this CPU runs — those the load-time self-check
 * rejected included — through the simdProbe test hook (native/cpu/simd_probe.cpp):
 * - lane by lane against the scalar variant, which defines them: bit for bit, except which NaN
 *   comes out of an operation on two NaNs; on special values (±0, ±denormals, ±1e-30, ±1e30, ±inf,
 *   NaN, ties for rounding, the float limits) at every lane position, and on random values;
 * - the scalar variant itself against the definitions written out here in float64, exactly, and
 *   the transcendentals against Math.* (and an erfc of our own) within the errors simd.h states;
 * - loads and stores of every tail length 0…W, and packing at every edge.
 * It fails when simd.h (or activation_inl.h, pack_inl.h) gains a function with no case here, or
 * when intrinsics appear in a native/cpu file the probe does not reach.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

import { describe, expect, it } from 'vitest';

import { native } from '../lib/native/addon';
import type { Isa } from '../lib/native/core';
import type { SimdHelper } from '../lib/native/simd_probe';
import { Activations } from '../lib/native/ops.generated';
import { bits, fromBits, rng, roundBf16 } from './helpers';

const cpuDir = path.resolve(__dirname, '..', 'native', 'cpu');
/** This build's variants, slowest first (scalar, avx2, avx512 on x64; scalar, neon on arm64). */
const order: Isa[] = native.isaInfo().compiled;
/** Every variant the CPU runs, whatever the self-check said of it. */
const cpuIsas = order.slice(0, order.indexOf(native.isaInfo().detected) + 1);
const vectorIsas = cpuIsas.filter((i) => i !== 'scalar');
const WMAX = 16;

const FLT_MAX = 3.4028234663852886e38, FLT_MIN = 1.1754943508222875e-38, DENORM_MIN = 1.401298464324817e-45;
/** An odd number of values, so that repeating the list puts each one in every lane. */
const specials = [
  0, -0, 1e-40, -1e-40, DENORM_MIN, -DENORM_MIN, 1e-30, -1e-30, 1e30, -1e30, Infinity, -Infinity, NaN,
  1, -1, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.75, -2, 4194304.5, 0.49999997, FLT_MIN, -FLT_MIN, FLT_MAX, -FLT_MAX,
];
const hex = (x: number): string => `0x${bits(x).toString(16).padStart(8, '0')}`;
const show = (x: number): string => `${x} (${hex(x)})`;

/** n values cycling through `values` (every value at every lane position when n ≥ 16 · values.length). */
function cycle(values: number[], n: number): Float32Array {
  return Float32Array.from({ length: n }, (_, i) => values[i % values.length]);
}
/** Pads to a multiple of 16 with ones (every variant's lane-wise helpers take whole vectors). */
function whole(a: number[] | Float32Array): Float32Array {
  const out = new Float32Array(Math.ceil(a.length / WMAX) * WMAX).fill(1);
  out.set(a);
  return out;
}
function randoms(n: number, seed: number): number[] {
  const r = rng(seed);
  const scales = [1e-3, 1, 30, 1e4];
  return Array.from({ length: n }, (_, i) => Math.fround((r() * 2 - 1) * scales[i % scales.length]));
}

/** Runs one helper on one variant; returns the output and the variant's lane width. */
function probe(isa: Isa, fn: SimdHelper, ins: Float32Array[], opts: { out?: Float32Array; args?: number[] } = {}) {
  const out = opts.out ?? new Float32Array(ins[0]?.length ?? 0);
  const [a, b, c, d] = ins;
  const W = native.simdProbe({ isa, fn, out, a, b, c, d, args: opts.args ? Int32Array.from(opts.args) : undefined });
  return { out, W };
}

type Mode = 'bits' | 'value';
/**
 * Fails with `label` and the first differing element (and its inputs) unless got[i] equals want[i]
 * for i < count: the same bits ('value': or both NaN).
 */
function agree(label: string, got: Float32Array, want: Float32Array, mode: Mode, ins: Float32Array[] = [], count = got.length): void {
  for (let i = 0; i < count; i++) {
    const g = got[i], w = want[i];
    if (bits(g) === bits(w) || (mode === 'value' && Number.isNaN(g) && Number.isNaN(w))) continue;
    const inputs = ins.length ? ` (inputs ${ins.map((a) => show(a[i])).join(', ')})` : '';
    expect.fail(`${label}: element ${i}${inputs}: got ${show(g)}, want ${show(w)}`);
  }
}

// ---- the definitions, in float64 rounded to float32 once (exact for + − × ÷ √ of float32 inputs) ----
const f = Math.fround;
function roundEven(x: number): number {
  if (!Number.isFinite(x) || Math.abs(x) >= 2 ** 23) return x;
  let r = Math.round(x);
  if (r - x === 0.5 && r % 2 !== 0) r -= 1;
  return r;
}
/** Pairwise by halves, in float, as simd.h states for vsum and vhmax. */
function tree(v: number[], op: (a: number, b: number) => number): number {
  while (v.length > 1) {
    const h = v.length / 2;
    v = v.slice(0, h).map((x, i) => f(op(x, v[i + h])));
  }
  return v[0];
}
const maxRule = (a: number, b: number): number => (a > b ? a : b);
const minRule = (a: number, b: number): number => (a < b ? a : b);

/** erfc in float64 (relative error ~1e-15): Taylor series of erf below 2, a continued fraction above. */
function erfc(z: number): number {
  if (Number.isNaN(z)) return NaN;
  if (z < 0) return 2 - erfc(-z);
  if (z < 2) {
    let term = z, sum = z;
    for (let n = 1; n < 80; n++) {
      term *= (-z * z) / n;
      sum += term / (2 * n + 1);
    }
    return 1 - (2 / Math.sqrt(Math.PI)) * sum;
  }
  let frac = z;
  for (let n = 200; n >= 1; n--) frac = z + n / 2 / frac;
  return Math.exp(-z * z) / (Math.sqrt(Math.PI) * frac);
}
const normcdf = (x: number): number => 0.5 * erfc(-x / Math.SQRT2);

interface LaneCase {
  arity: 1 | 2 | 3 | 4;
  mode: Mode;
  /** The exact definition, when the scalar variant is held to one. */
  def?: (...x: number[]) => number;
  /** Operands (each of one length, a multiple of 16); by default every combination of the specials plus randoms. */
  inputs?: () => Float32Array[];
  args?: number[];
}

function combinations(arity: number, seed: number): Float32Array[] {
  const n = specials.length ** arity;
  const cols = Array.from({ length: arity }, (_, k) =>
    Array.from({ length: n }, (_, i) => specials[Math.floor(i / specials.length ** k) % specials.length]));
  const extra = Array.from({ length: arity }, (_, k) => randoms(16 * 97, seed + k));
  return cols.map((c, k) => whole([...c, ...extra[k]]));
}
const unaryInputs = (extra: number[] = []): Float32Array[] =>
  [whole([...cycle(specials, specials.length * WMAX), ...randoms(4000, 7), ...extra])];

const laneCases: Record<string, LaneCase> = {
  vload: { arity: 1, mode: 'bits', def: (a) => a },
  vabs: { arity: 1, mode: 'bits', def: (a) => fromBits(bits(a) & 0x7fffffff) },
  vsqrt: { arity: 1, mode: 'value', def: (a) => f(Math.sqrt(a)) },
  vround: { arity: 1, mode: 'value', def: roundEven },
  vpow2i: {
    arity: 1, mode: 'bits', def: (n) => 2 ** n,
    inputs: () => [whole(Array.from({ length: 255 }, (_, i) => i - 126).concat(-126, 127, 128))],
  },
  vadd: { arity: 2, mode: 'value', def: (a, b) => f(a + b) },
  vsub: { arity: 2, mode: 'value', def: (a, b) => f(a - b) },
  vmul: { arity: 2, mode: 'value', def: (a, b) => f(a * b) },
  vdiv: { arity: 2, mode: 'value', def: (a, b) => f(a / b) },
  vmax: { arity: 2, mode: 'value', def: maxRule },
  vmin: { arity: 2, mode: 'value', def: minRule },
  vcopysign: { arity: 2, mode: 'bits', def: (m, s) => fromBits((bits(m) & 0x7fffffff) | (bits(s) & 0x80000000)) },
  // vfma and vfnma round once (std::fma in the scalar variant): held to the scalar variant only.
  vfma: { arity: 3, mode: 'value' },
  vfnma: { arity: 3, mode: 'value' },
  vselect_pos: { arity: 3, mode: 'bits', def: (c, a, b) => (c > 0 ? a : b) },
  vselect_lt: {
    arity: 4, mode: 'bits', def: (c, d, a, b) => (c < d ? a : b),
    inputs: () => {
      const [c, d] = combinations(2, 11);
      return [c, d, Float32Array.from(c, (_, i) => i + 0.5), Float32Array.from(c, (_, i) => -i - 0.25)];
    },
  },
  // The transcendentals: the scalar variant against Math.* in the tests below.
  vexp: { arity: 1, mode: 'value', inputs: () => unaryInputs(randoms(4000, 8).map((x) => f(x / 100))) },
  vnormcdf: { arity: 1, mode: 'value' },
  vnormcdf_exp: { arity: 1, mode: 'value' },
  vnormcdf_reduced: { arity: 1, mode: 'value' },
  vtanh: { arity: 1, mode: 'value' },
  // Ties to even both ways, a tie at the largest bf16 (to +inf), the smallest normal, a denormal.
  // On avx512bf16 this is the hardware's vcvtneps2bf16 against the definition.
  vround_bf16: {
    arity: 1, mode: 'bits', def: roundBf16,
    inputs: () => unaryInputs([0x3f808000, 0x3f818000, 0x3f808001, 0xbf818000, 0x7f7f8000, 0x7f7f7fff, 0x00800000, 0x807fffff, 0x00008000]
      .map(fromBits)),
  },
};
// Every activation, by its number (the schema lists them in the order of ops::Act).
const ACTS = Activations.map((_, i) => i);
for (const act of ACTS) {
  laneCases[`act_forward ${act}`] = { arity: 1, mode: 'value', args: [act] };
  laneCases[`act_derivative ${act}`] = { arity: 1, mode: 'value', args: [act] };
}

function inputsOf(c: LaneCase, seed: number): Float32Array[] {
  return c.inputs?.() ?? (c.arity === 1 ? unaryInputs() : combinations(c.arity, seed));
}

describe('simd vocabulary: lane-wise helpers', () => {
  it.each(Object.keys(laneCases))('%s: every variant lane by lane against the scalar one, the scalar one against the definition', (name) => {
    const c = laneCases[name];
    const fn = name.split(' ')[0] as SimdHelper;
    const ins = inputsOf(c, name.length);
    const ref = probe('scalar', fn, ins, { args: c.args }).out;
    if (c.def) {
      const want = Float32Array.from(ref, (_, i) => c.def!(...ins.map((a) => a[i])));
      agree(`${name}, scalar variant against its definition`, ref, want, c.mode, ins);
    }
    for (const isa of vectorIsas) {
      const got = probe(isa, fn, ins, { args: c.args }).out;
      agree(`${name}, ${isa} against the scalar variant`, got, ref, c.mode, ins);
    }
  });

  it.each(cpuIsas)('vzero and vset1 (%s) fill every lane', (isa) => {
    const a = unaryInputs()[0];
    agree(`vzero ${isa}`, probe(isa, 'vzero', [a]).out, new Float32Array(a.length), 'bits');
    agree(`vset1 ${isa}`, probe(isa, 'vset1', [a]).out, a, 'bits');
  });
});

describe('simd vocabulary: reductions and tails', () => {
  // Groups of 16 floats: specials at every lane, and randoms of mixed magnitude (where the order of
  // the sum shows).
  const groups = whole([...cycle(specials, specials.length * WMAX), ...randoms(16 * 64, 9).map((x, i) => (i % 5 ? x : x * 1e7))]);

  it.each(cpuIsas)('vsum and vhmax (%s) reduce pairwise by halves, bit for bit', (isa) => {
    for (const [fn, op] of [['vsum', (a: number, b: number) => a + b], ['vhmax', maxRule]] as const) {
      const { out, W } = probe(isa, fn, [groups]);
      const want = Float32Array.from({ length: groups.length / W }, (_, g) => tree(Array.from(groups.subarray(g * W, g * W + W)), op));
      agree(`${fn} ${isa}`, out, want, 'value', [], want.length);
    }
  });

  it.each(cpuIsas)('vload_n and vstore_n, vload_w and vstore_w (%s) at every tail length: zero-fill, and nothing written past n', (isa) => {
    const a = whole(cycle(specials, specials.length * WMAX));
    const sentinel = fromBits(0x7fc0dead);
    const W = probe(isa, 'vload', [a]).W;
    for (const [load, store] of [['vload_n', 'vstore_n'], ['vload_w', 'vstore_w']] as const) {
      for (let t = 0; t <= W; t++) {
        const loaded = probe(isa, load, [a], { args: [t] }).out;
        const wantLoad = Float32Array.from(a, (x, i) => (i % W < t ? x : 0));
        agree(`${load} ${isa} t=${t}`, loaded, wantLoad, 'bits');
        const stored = probe(isa, store, [a], { args: [t], out: new Float32Array(a.length).fill(sentinel) }).out;
        const wantStore = Float32Array.from(a, (x, i) => (i % W < t ? x : sentinel));
        agree(`${store} ${isa} t=${t}`, stored, wantStore, 'bits');
      }
    }
  });

  it.each(cpuIsas)('vround_bf16_n (%s) at every length up to 2W + 1: vround_bf16 of each value, nothing written past n', (isa) => {
    const a = whole([...cycle(specials, specials.length * WMAX), ...randoms(64, 5)]);
    const sentinel = fromBits(0x7fc0face);
    for (let n = 0; n <= 2 * WMAX + 1; n++) {
      const got = probe(isa, 'vround_bf16_n', [a], { args: [n], out: new Float32Array(a.length).fill(sentinel) }).out;
      const want = Float32Array.from(a, (x, i) => (i < n ? roundBf16(x) : sentinel));
      agree(`vround_bf16_n ${isa} n=${n}`, got, want, 'bits', [a]);
    }
  });

  it.each(ACTS)('act_tile (act %i) is act_forward on every vector of the tile, bit for bit, in every variant', (act) => {
    const [a] = unaryInputs();
    for (const isa of cpuIsas) {
      agree(`act_tile ${act} ${isa}`, probe(isa, 'act_tile', [a], { args: [act] }).out, probe(isa, 'act_forward', [a], { args: [act] }).out, 'value', [a]);
    }
  });

  it.each(ACTS)('act_derivative_tile (act %i) is act_derivative on every vector of the tile, bit for bit, in every variant', (act) => {
    const [a] = unaryInputs();
    for (const isa of cpuIsas) {
      agree(`act_derivative_tile ${act} ${isa}`, probe(isa, 'act_derivative_tile', [a], { args: [act] }).out, probe(isa, 'act_derivative', [a], { args: [act] }).out, 'value', [a]);
    }
  });

  it.each(ACTS)('act_forward_n and act_backward_n (act %i) at every length up to 2W + 1, against the scalar variant', (act) => {
    const r = rng(act + 20);
    const sentinel = fromBits(0x7fc0beef);
    for (let n = 1; n <= 2 * WMAX + 1; n++) {
      const x = Float32Array.from({ length: n }, (_, i) => (i % 3 === 0 ? specials[(i + n) % specials.length] : f((r() - 0.5) * 8)));
      const dy = Float32Array.from({ length: n }, () => f(r() - 0.5));
      const run = (isa: Isa, fn: SimdHelper, ins: Float32Array[]) =>
        probe(isa, fn, ins, { args: [act], out: new Float32Array(n + WMAX).fill(sentinel) }).out;
      for (const [fn, ins] of [['act_forward_n', [x]], ['act_backward_n', [dy, x]]] as const) {
        const ref = run('scalar', fn, [...ins]);
        agree(`${fn} scalar wrote past n = ${n}`, ref.subarray(n), new Float32Array(WMAX).fill(sentinel), 'bits');
        for (const isa of vectorIsas)
          agree(`${fn} ${isa} n=${n}`, run(isa, fn, [...ins]), ref, 'value');
      }
    }
  });
});

describe('simd vocabulary: transcendentals within the errors simd.h states', () => {
  const r = rng(31);
  const uniform = (lo: number, hi: number, n: number) => Array.from({ length: n }, () => f(lo + (hi - lo) * r()));
  const ulp = (y: number) => (Math.abs(y) < FLT_MIN ? DENORM_MIN : 2 ** (Math.floor(Math.log2(Math.abs(f(y)))) - 23));
  const run = (fn: SimdHelper, xs: number[]) => {
    const x = whole(xs);
    const ref = probe('scalar', fn, [x]).out;
    for (const isa of vectorIsas) agree(`${fn} ${isa}`, probe(isa, fn, [x]).out, ref, 'value', [x]);
    return { x, y: ref };
  };
  const worst: Record<string, number> = {};
  const note = (label: string, e: number) => (worst[label] = Math.max(worst[label] ?? 0, e));

  it('vexp: < 1.3 ulp on [-87.33, 88.37], 0 below -87.3365, saturating above 88.3763, NaN for NaN', () => {
    const { x, y } = run('vexp', [...uniform(-87.33, 88.37, 100_000), ...uniform(-1, 1, 20_000), ...uniform(-1e-6, 1e-6, 1000),
      ...specials, -87.3365, -87.34, 88.3763, 88.38, 88.8, 100]);
    const cap = probe('scalar', 'vexp', [whole([88.3762626647949])]).out[0];
    expect(cap).toBeCloseTo(2.4061e38, -34);
    for (let i = 0; i < x.length; i++) {
      const v = x[i];
      if (Number.isNaN(v)) expect(y[i]).toBeNaN();
      else if (v < f(-87.3365447504)) expect(y[i], `vexp(${v})`).toBe(0);
      else if (v >= f(88.3762626647949)) expect(y[i], `vexp(${v})`).toBe(cap);
      else if (v >= -87.33 && v <= 88.37) expect(note('vexp ulp', Math.abs(y[i] - Math.exp(v)) / ulp(Math.exp(v))), `vexp(${v})`).toBeLessThan(1.3);
    }
  });

  it('vnormcdf: |error| < 3.2e-7, relative error < 4% in the lower tail down to x = -13, NaN for NaN', () => {
    const { x, y } = run('vnormcdf', [...uniform(-14, 14, 100_000), ...uniform(-13, -3, 20_000), ...specials]);
    for (let i = 0; i < x.length; i++) {
      const v = x[i], want = normcdf(v);
      if (Number.isNaN(v)) {
        expect(y[i]).toBeNaN();
        continue;
      }
      expect(note('vnormcdf abs', Math.abs(y[i] - want)), `vnormcdf(${v})`).toBeLessThan(3.2e-7);
      if (v >= -13 && v <= -1) expect(note('vnormcdf tail rel', Math.abs(y[i] - want) / want), `vnormcdf(${v})`).toBeLessThan(0.04);
    }
  });

  it('vnormcdf_reduced (the GELU of int8 and bf16 products): |error| < 1e-6, 0 and 1 at ±inf, NaN for NaN', () => {
    const { x, y } = run('vnormcdf_reduced', [...uniform(-14, 14, 100_000), ...uniform(-1, 1, 20_000), ...specials]);
    for (let i = 0; i < x.length; i++) {
      const v = x[i];
      if (Number.isNaN(v)) expect(y[i]).toBeNaN();
      else expect(note('vnormcdf_reduced abs', Math.abs(y[i] - normcdf(v))), `vnormcdf_reduced(${v})`).toBeLessThan(1e-6);
    }
  });

  it('vtanh: |error| < 1.5e-7, odd, ±1 at ±inf, NaN for NaN', () => {
    const { x, y } = run('vtanh', [...uniform(-20, 20, 100_000), ...uniform(-0.01, 0.01, 20_000), ...specials]);
    for (let i = 0; i < x.length; i++) {
      const v = x[i];
      if (Number.isNaN(v)) expect(y[i]).toBeNaN();
      else expect(note('vtanh abs', Math.abs(y[i] - Math.tanh(v))), `vtanh(${v})`).toBeLessThan(1.5e-7);
      if (y[i] === 0) expect(Math.sign(1 / y[i]), `the sign of vtanh(${v})`).toBe(Math.sign(1 / v));
    }
    console.log('transcendentals, largest error seen:', Object.entries(worst).map(([k, v]) => `${k} ${v.toExponential(2)}`).join(', '));
  });
});

describe('gemm packing and the finite scan', () => {
  const src = whole([...cycle(specials, 7 * specials.length), ...randoms(2000, 41)]);
  const sentinel = fromBits(0x7fc0f00d);

  it.each(cpuIsas)('pack_k_major and pack_transposed (%s): every panel height, edge and depth tail', (isa) => {
    for (const transposed of [false, true])
      for (const P of [4, 6, 12, 16, 32])
        for (const rows of [1, P - 1, P, P + 1, 2 * P + 3])
          for (const kc of [1, 7, 8, 9, 16, 19]) {
            const ld = (transposed ? kc : rows) + 3;
            const panels = Math.ceil(rows / P);
            const out = new Float32Array(panels * P * kc + 8).fill(sentinel);
            probe(isa, transposed ? 'pack_transposed' : 'pack_k_major', [src], { args: [P, rows, kc, ld], out });
            const want = Float32Array.from(out, (_, o) => {
              if (o >= panels * P * kc) return sentinel;
              const panel = Math.floor(o / (P * kc)), k = Math.floor((o % (P * kc)) / P), i = panel * P + (o % P);
              return i >= rows ? 0 : src[transposed ? i * ld + k : k * ld + i];
            });
            agree(`${isa} transposed=${transposed} P=${P} rows=${rows} kc=${kc}`, out, want, 'bits');
          }
  });

  it.each(cpuIsas)('transpose_8x8 (%s): 8, 6 or 4 rows, only those written', (isa) => {
    const lds = 11, ldd = 9;
    for (const rows of [4, 6, 8]) {
      const out = new Float32Array(8 * ldd).fill(sentinel);
      if (isa === 'scalar') {
        expect(() => probe(isa, 'transpose_8x8', [src], { args: [rows, lds, ldd], out })).toThrow(/not in this variant/);
        continue;
      }
      probe(isa, 'transpose_8x8', [src], { args: [rows, lds, ldd], out });
      const want = Float32Array.from(out, (_, o) => (o % ldd < rows ? src[(o % ldd) * lds + Math.floor(o / ldd)] : sentinel));
      agree(`${isa} rows=${rows}`, out, want, 'bits');
    }
  });

  it.each(cpuIsas)('first_nonfinite_range (%s): every position and start in and around a vector', (isa) => {
    const n = 3 * WMAX + 5;
    const finite = Float32Array.from({ length: n }, (_, i) => [FLT_MAX, -FLT_MAX, DENORM_MIN, -0, 1e30, 0.5][i % 6]);
    for (const bad of [NaN, Infinity, -Infinity, fromBits(0xff800001)])
      for (let pos = -1; pos < n; pos++) {
        const x = finite.slice();
        if (pos >= 0) x[pos] = bad;
        for (const begin of [0, 1, 7, 8, 15, 16, 17]) {
          const out = new Float32Array(1);
          probe(isa, 'first_nonfinite_range', [x], { args: [begin, n], out });
          expect(out[0], `${isa} bad=${bad} pos=${pos} begin=${begin}`).toBe(pos >= begin ? pos : -1);
        }
      }
  });
});

describe.runIf(cpuIsas.includes('avx512bf16'))('the BF16 helpers of the avx512bf16 variant (vdpbf16ps, vcvtne2ps2bf16)', () => {
  const word = (lo: number, hi: number) => fromBits((bits(roundBf16(lo)) >>> 16) | (bits(roundBf16(hi)) & 0xffff0000));
  const half = (w: number, high: boolean) => fromBits(high ? bits(w) & 0xffff0000 : bits(w) << 16);

  it('vdot_bf16: acc + a_hi·b_hi + a_lo·b_lo, two fp32 FMAs (products of bf16 values are exact)', () => {
    const r = rng(41), n = 16 * 400;
    const pairs = () => Float32Array.from({ length: n }, () => word(f((r() - 0.5) * 8), f((r() - 0.5) * 8)));
    const [a, b] = [pairs(), pairs()];
    const acc = Float32Array.from({ length: n }, (_, i) => (i % 7 === 0 ? 0 : f((r() - 0.5) * 4)));
    const got = probe('avx512bf16', 'vdot_bf16', [acc, a, b]).out;
    const want = Float32Array.from(acc, (c, i) => f(f(c + half(a[i], true) * half(b[i], true)) + half(a[i], false) * half(b[i], false)));
    agree('vdot_bf16', got, want, 'value', [acc, a, b]);
  });

  it.each([[12, 1], [12, 7], [32, 8], [32, 19], [5, 3]])('pack_bf16_pair_rows, rows %i long, kc %i: words of (k, k + 1) rounded as vround_bf16, an odd last k paired with 0', (P, kc) => {
    const src = whole([...cycle(specials, 2 * P), ...randoms(kc * P, kc)]).subarray(0, kc * P);
    const out = probe('avx512bf16', 'pack_bf16_pair_rows', [src], { args: [P, kc], out: new Float32Array(Math.ceil(kc / 2) * P) }).out;
    const want = Float32Array.from(out, (_, i) => {
      const k = 2 * Math.floor(i / P), c = i % P;
      return word(src[k * P + c], k + 1 < kc ? src[(k + 1) * P + c] : 0);
    });
    agree(`pack_bf16_pair_rows P ${P} kc ${kc}`, out, want, 'bits', [], want.length);
  });

  it.each([[1, 1], [2, 1], [15, 1], [16, 1], [17, 1], [33, 1], [80, 1], [17, 3], [32, 2]])('pack_bf16_row, n %i, %i row(s) (pack_rows): words of neighbours (2j, 2j + 1) rounded as vround_bf16, an odd last one paired with 0', (n, rows) => {
    const src = whole([...cycle(specials, 32), ...randoms(n * rows, n * rows)]).subarray(0, n * rows);
    const half = Math.ceil(n / 2);
    const want = Float32Array.from({ length: rows * half }, (_, i) => {
      const r = Math.floor(i / half), j = i % half, row = src.subarray(r * n, (r + 1) * n);
      return word(row[2 * j], 2 * j + 1 < n ? row[2 * j + 1] : 0);
    });
    const out = probe('avx512bf16', 'pack_bf16_row', [src], { args: [n, rows], out: new Float32Array(want.length) }).out;
    agree(`pack_bf16_row n ${n}, rows ${rows}`, out, want, 'bits', [], want.length);
  });

  it('the other variants do not have them', () => {
    for (const isa of cpuIsas.filter((i) => i !== 'avx512bf16'))
      expect(() => probe(isa, 'vdot_bf16', [new Float32Array(16), new Float32Array(16), new Float32Array(16)])).toThrow(/only in the avx512bf16 variant/);
  });
});

describe('the int8 kernels (gemm_int8.cpp: vpdpbusd on avx512, int16 widening on avx2, integers on scalar)', () => {
  // The avx512 variants' int8 kernels are the VNNI ones: this CPU must have AVX-512 VNNI to run them.
  const int8Isas = cpuIsas.filter((isa) => (isa !== 'avx512' && isa !== 'avx512bf16') || vnni());
  function vnni(): boolean {
    try {
      probe('avx512', 'int8_dot_tile', [new Float32Array(12 * 32 * 4), new Float32Array(12 * 32 * 4)], { out: new Float32Array(384), args: [4] });
      return true;
    } catch {
      return false;
    }
  }

  it.each(int8Isas)('%s: dot_tile gives the exact int32 sums Σ_k xq[r][k] q[k][n] over 12 rows and one or two 32-column panels', (isa) => {
    const r = rng(3);
    for (const N of [32, 64])
      for (const K4 of [4, 8, 132]) {
        const n = Math.max(12 * K4, N * K4);
        const xq = Float32Array.from({ length: n }, (_, i) => (i < 12 * K4 ? [0, 255, 1, 128][i % 4] * (i % 7 === 0 ? 1 : 0) + Math.floor(r() * 256) * (i % 7 === 0 ? 0 : 1) : 0));
        const q = Float32Array.from({ length: n }, (_, i) => (i < N * K4 ? (i % 5 === 0 ? [127, -127][i % 2] : Math.floor(r() * 255) - 127) : 0));
        const { out } = probe(isa, 'int8_dot_tile', [xq, q], { out: new Float32Array(12 * N), args: [K4, N] });
        const want = new Float32Array(12 * N);
        for (let row = 0; row < 12; row++)
          for (let col = 0; col < N; col++) {
            let sum = 0;  // panel col >> 5, its group k >> 2: 32 columns of 4 bytes
            for (let k = 0; k < K4; k++) sum += xq[row * K4 + k] * q[(col >> 5) * K4 * 32 + (k >> 2) * 128 + (col & 31) * 4 + (k & 3)];
            want[row * N + col] = sum;
          }
        agree(`${isa} int8_dot_tile K4 ${K4}, N ${N}`, out, want, 'bits');
      }
  });

  // The AMX block (avx512 on an AMX-INT8 CPU): 16 or 32 rows by one panel, K4 with and without a
  // tail past whole 64-byte tile rows.
  const amx = (() => {
    try {
      probe('avx512', 'int8_amx_tile', [new Float32Array(128), new Float32Array(128)], { out: new Float32Array(512), args: [4, 16] });
      return true;
    } catch {
      console.log('no AMX block test: this CPU (or NF_AMX=0) runs no AMX int8 tiles');
      return false;
    }
  })();
  it.skipIf(!amx)('avx512: the AMX block gives the exact int32 sums over 16 or 32 rows and a 32-column panel', () => {
    const r = rng(5);
    for (const rows of [16, 32])
      for (const K4 of [4, 64, 132, 768]) {
        const n = Math.max(rows, 32) * K4;
        const xq = Float32Array.from({ length: n }, (_, i) => (i < rows * K4 ? (i % 9 === 0 ? [0, 255][i % 2] : Math.floor(r() * 256)) : 0));
        const q = Float32Array.from({ length: n }, (_, i) => (i < 32 * K4 ? (i % 5 === 0 ? [127, -127][i % 2] : Math.floor(r() * 255) - 127) : 0));
        const { out } = probe('avx512', 'int8_amx_tile', [xq, q], { out: new Float32Array(rows * 32), args: [K4, rows] });
        const want = new Float32Array(rows * 32);
        for (let row = 0; row < rows; row++)
          for (let col = 0; col < 32; col++) {
            let sum = 0;
            for (let k = 0; k < K4; k++) sum += xq[row * K4 + k] * q[(k >> 2) * 128 + col * 4 + (k & 3)];
            want[row * 32 + col] = sum;
          }
        agree(`avx512 int8_amx_tile rows ${rows}, K4 ${K4}`, out, want, 'bits');
      }
  });

  it.each(int8Isas)('%s: quantize gives each row its scale, zero point and bytes as the definition (gemm_int8.cpp) says', (isa) => {
    const r = rng(4);
    for (const [rows, K] of [[3, 1], [2, 17], [5, 67]]) {
      const x = Float32Array.from({ length: rows * K }, (_, i) => (i % 11 === 0 ? 0 : Math.fround((r() * 2 - 0.7) * 3)));
      if (rows > 2) x.fill(0, 2 * K, 3 * K); // an all-zero row: scale 1, zero point 0
      const K4 = Math.ceil(K / 4) * 4;
      const { out } = probe(isa, 'int8_quantize', [x], { out: new Float32Array(rows * (K4 + 2)), args: [rows, K] });
      const want = new Float32Array(rows * (K4 + 2));
      for (let row = 0; row < rows; row++) {
        const v = x.subarray(row * K, (row + 1) * K);
        const lo = Math.min(0, ...v), hi = Math.max(0, ...v);
        const a = hi > lo ? Math.fround(Math.fround(hi - lo) / 255) : 1, inv = Math.fround(1 / a);
        const z = Math.min(255, Math.max(0, roundEven(Math.fround(-lo * inv))));
        for (let k = 0; k < K; k++) want[row * K4 + k] = Math.min(255, Math.max(0, roundEven(Math.fround(v[k] * inv)) + z));
        want[rows * K4 + row] = a;
        want[rows * (K4 + 1) + row] = z;
      }
      agree(`${isa} int8_quantize rows ${rows}, K ${K}`, out, want, 'bits');
    }
  });
});

describe('coverage', () => {
  it('the specials are an odd number, so that cycling through them visits every lane', () => {
    expect(specials.length % 2).toBe(1);
  });

  /** The functions a header defines (lines at column 0 that declare one). */
  function functionsOf(file: string): string[] {
    const src = fs.readFileSync(path.join(cpuDir, file), 'utf8');
    return [...new Set([...src.matchAll(/^(?:inline\s+)?[A-Za-z_][\w:<>]*\s+([A-Za-z_]\w*)\s*\(/gm)].map((m) => m[1]))];
  }
  /** Where each helper is exercised above. */
  const exercisedBy: Record<string, string> = {
    ...Object.fromEntries(Object.keys(laneCases).map((k) => [k.split(' ')[0], k])),
    vzero: 'vzero and vset1', vset1: 'vzero and vset1', vstore: 'every lane-wise case',
    vsum: 'vsum and vhmax', vhmax: 'vsum and vhmax',
    vload_n: 'vload_n and vstore_n', vstore_n: 'vload_n and vstore_n', tail_mask: 'vload_n and vstore_n',
    vload_w: 'vload_w and vstore_w', vstore_w: 'vload_w and vstore_w', act_tile: 'act_tile', act_derivative_tile: 'act_derivative_tile', with_act: 'act_tile (its run-time form goes through with_act)', vround_bf16_n: 'vround_bf16_n',
    act_forward_n: 'act_forward_n and act_backward_n', act_backward_n: 'act_forward_n and act_backward_n',
    pack_k_major: 'pack_k_major and pack_transposed', pack_transposed: 'pack_k_major and pack_transposed',
    transpose_8x8: 'transpose_8x8', first_nonfinite_range: 'first_nonfinite_range',
    vdot_bf16: 'vdot_bf16', pack_bf16_pair_rows: 'pack_bf16_pair_rows', pack_bf16_row: 'pack_bf16_row',
    pack_row_pairs: 'pack_bf16_pair_rows (the probe packs through it)', pack_rows: 'pack_bf16_row (the probe packs through it)',
    vdot_step: 'vdot_bf16 (and every GEMM test: the float GEMM\'s products)',
    // bfloat16 storage: test/bf16_storage.test.ts holds castBf16 (convert_bf16: widen_bf16_n, narrow_bf16_n,
    // vload_bf16_w, vstore_bf16_w over whole vectors and a tail) to the scalar rounding rule on every variant, and the ops on bf16 activations
    // (the GEMM packing from bf16 sources) bit for bit to the same ops on float32 storage.
    vload_bf16_w: 'castBf16 in test/bf16_storage.test.ts', vstore_bf16_w: 'castBf16 in test/bf16_storage.test.ts',
    widen_bf16_n: 'castBf16 in test/bf16_storage.test.ts', narrow_bf16_n: 'castBf16 in test/bf16_storage.test.ts',
    pack_rows_bf16: 'the ops on bf16 activations in test/bf16_storage.test.ts (avx512bf16)',
    pack_bf16_pair_rows_bf16: 'the ops on bf16 activations in test/bf16_storage.test.ts (avx512bf16)',
    pack_row_pairs_bf16: 'the ops on bf16 activations in test/bf16_storage.test.ts (avx512bf16)',
  };

  it.each(['simd.h', 'activation_inl.h', 'pack_inl.h'])('every function of %s has a lane test here', (file) => {
    const names = functionsOf(file);
    expect(names.length).toBeGreaterThan(2);
    expect(names.filter((n) => !(n in exercisedBy)), `functions of ${file} without a case in test/simd.test.ts`).toEqual([]);
  });

  it('intrinsics appear only in files the probe reaches', () => {
    const reached = ['simd.h', 'pack_inl.h', 'finite.cpp', 'gemm_int8.cpp'];
    // x86 (_mm256_add_ps) and NEON (vaddq_f32, vget_low_f32, vreinterpretq_u32_f32) intrinsics
    const intrinsic = /\b(_mm(512|256)?_\w+|v\w+_[fsu](8|16|32|64))\(/;
    const withIntrinsics = fs.readdirSync(cpuDir).filter((file) =>
      /\.(h|cpp)$/.test(file) && intrinsic.test(fs.readFileSync(path.join(cpuDir, file), 'utf8')));
    expect(withIntrinsics.filter((file) => !reached.includes(file)), 'ISA-specific code the simd test does not reach').toEqual([]);
  });

  it('the probe rejects a name it does not know, and a variant the CPU lacks', () => {
    expect(() => probe('scalar', 'vnothing' as SimdHelper, [new Float32Array(16)])).toThrow(/no helper named 'vnothing'/);
    for (const isa of ['avx512', 'neon'] as const)
      if (!cpuIsas.includes(isa)) expect(() => probe(isa, 'vadd', [new Float32Array(16)])).toThrow(/cannot run/);
  });
});
