/**
 * Precision 'int8' (dynamic quantization, native/cpu/gemm_int8.cpp): every op that runs it —
 * linearForward, feedforwardForward, attentionForward (its projections; the core stays fp32),
 * patchEmbedForward — against the float64 reference on every ISA variant this machine runs (on an
 * AVX-512 VNNI CPU the avx512 variant runs the vpdpbusd kernels, the avx2 variant the int16-widening
 * ones, scalar plain int32), with int8's own tolerances:
 *   one quantized product: ‖Δ‖/‖ref‖ < 2e-2. The error of a dot product of K terms with u8
 *   activations (step a = range/255 per row) and int8 weights (step s = max|w|/127 per channel) is
 *   about the rounding noise of both, a/√12 and s/√12 per term, relative to the terms' spread: for
 *   Gaussian rows (range ≈ 6–7σ at K ≈ 100–1000, max|w| ≈ 3–3.5σ) that is √(0.008² + 0.008²) ≈ 1.1%
 *   (measured: 0.3–1.2%); 2e-2 leaves room for heavier tails, not for a wrong lane or a lost
 *   zero-point correction (errors of order 1).
 *   two products in a row (feed-forward, attention projections): < 3e-2 (the errors add in quadrature,
 *   and the second product quantizes the first one's output).
 * Also: the int8 packing (packWeights, precision 'int8') gives the same bits as quantizing per call,
 * on every variant, and is the same for every variant; the ops that compute gradients, and the general
 * gemm op, refuse 'int8'; and the modules: eval at 'int8' (prepacked and not, bit for bit), training
 * at 'int8' throws ERR_NF_STATE naming the fix.
 */
import { execFileSync } from 'node:child_process';

import { afterAll, afterEach, describe, expect, it } from 'vitest';

import {
  AdamW, crossEntropy, fit, Linear, native, setWeightPrepacking, Tensor, trainStep, ViTClassifier,
} from '../lib/index';
import { packedSize } from '../lib/core/prepack';
import { ErrorLog, f32, failure, isas, randn32, relErr, rng, withIsa } from './helpers';
import { bundle, bundleEnv } from './support/bundle';
import { int8KernelCases, runInt8KernelCase } from './support/int8_cases';

afterEach(() => setWeightPrepacking(true));

type Args = Record<string, unknown>;
const call = (op: string, args: Args) => (native as unknown as Record<string, (a: Args) => void>)[op](args);
const log = new ErrorLog(2e-2);
afterAll(() => log.report('int8 against the float64 reference, largest relative error'));

/** Runs `op` in float64 (the reference: exact products) and in float32 at 'int8'; returns `out` of both. */
function both(op: string, inputs: Record<string, Float64Array | null>, outs: Record<string, number>, dims: Args, out: string) {
  const run = (use64: boolean, precision?: 'int8') => {
    const a: Args = { ...dims, ...(precision ? { precision } : {}) };
    for (const [k, v] of Object.entries(inputs)) a[k] = v === null ? null : use64 ? v : f32(v);
    for (const [k, n] of Object.entries(outs)) a[k] = use64 ? new Float64Array(n) : new Float32Array(n);
    call(op, a);
    return a[out] as Float32Array | Float64Array;
  };
  return { ref: run(true), got: run(false, 'int8') };
}

interface OpCase { label: string; tol: number; run: (seed: number) => { ref: ArrayLike<number>; got: ArrayLike<number> } }

const linear = (rows: number, K: number, N: number, act: string, bias = true): OpCase => ({
  label: `linearForward rows ${rows}, ${K} → ${N}, ${act}${bias ? '' : ', no bias'}`, tol: 2e-2,
  run: (seed) => {
    const r = rng(seed);
    return both('linearForward', { x: randn32(rows * K, r), W: randn32(N * K, r, 1 / Math.sqrt(K)), b: bias ? randn32(N, r, 0.2) : null },
      { y: rows * N, preact: rows * N }, { rows, inFeatures: K, outFeatures: N, act }, 'y');
  },
});

const feedforward = (rows: number, D: number, F: number, activation: string): OpCase => ({
  label: `feedforwardForward rows ${rows}, D ${D}, F ${F}, ${activation}`, tol: 3e-2,
  run: (seed) => {
    const r = rng(seed);
    return both('feedforwardForward', { x: randn32(rows * D, r), W1: randn32(F * D, r, 1 / Math.sqrt(D)), b1: randn32(F, r, 0.2),
      W2: randn32(D * F, r, 1 / Math.sqrt(F)), b2: randn32(D, r, 0.2) }, { y: rows * D, h: rows * F, a: rows * F },
    { rows, D, F, activation }, 'y');
  },
});

const attention = (B: number, T: number, D: number, H: number, causal: boolean): OpCase => ({
  label: `attentionForward B ${B}, T ${T}, D ${D}, H ${H}${causal ? ', causal' : ''}`, tol: 3e-2,
  run: (seed) => {
    const r = rng(seed), n = B * T * D;
    return both('attentionForward', { x: randn32(n, r), qkvWeight: randn32(3 * D * D, r, 1 / Math.sqrt(D)), qkvBias: randn32(3 * D, r, 0.2),
      projWeight: randn32(D * D, r, 1 / Math.sqrt(D)), projBias: randn32(D, r, 0.2) },
    { out: n, qkv: 3 * n, ctx: n, lse: B * H * T }, { B, Tq: T, Tk: T, D, H, causal }, 'out');
  },
});

const patchEmbed = (B: number, C: number, Hh: number, W: number, P: number, D: number): OpCase => ({
  label: `patchEmbedForward B ${B}, C ${C}, ${Hh}×${W}, P ${P}, D ${D}`, tol: 2e-2,
  run: (seed) => {
    const r = rng(seed), K = C * P * P;
    return both('patchEmbedForward', { images: randn32(B * C * Hh * W, r), weight: randn32(D * K, r, 1 / Math.sqrt(K)), bias: randn32(D, r, 0.2) },
      { out: B * (Hh / P) * (W / P) * D }, { B, C, H: Hh, W, P, D }, 'out');
  },
});

const CASES: OpCase[] = [
  linear(1, 40, 12, 'none'),
  linear(7, 13, 59, 'gelu'),
  linear(65, 96, 72, 'gelu_tanh', false),
  linear(197, 768, 40, 'relu'),
  linear(33, 3, 100, 'silu'),
  feedforward(9, 20, 33, 'silu'),
  feedforward(30, 96, 200, 'gelu'),
  attention(2, 7, 40, 2, false),
  attention(1, 65, 48, 4, true),
  patchEmbed(2, 3, 8, 12, 4, 20),
];

describe.each(isas)("precision 'int8' against the float64 reference (%s)", (isa) => {
  it.each(CASES)('$label', (c) => {
    const { ref, got } = withIsa(isa, () => c.run(c.label.length * 31 + 7));
    const e = log.add(`${c.label} (${isa})`, relErr(got, ref));
    expect(e, c.label).toBeLessThan(c.tol);
    expect(e, `${c.label}: quantized, not float32`).toBeGreaterThan(1e-4);
  });
});

describe('the AMX int8 kernels (Intel AMX-INT8 CPUs, Linux)', () => {
  const amx = native.isaInfo().int8Kernels === 'amx';
  if (!amx) console.log(`no AMX comparison: the active variant runs the ${native.isaInfo().int8Kernels} int8 kernels here`);
  it.skipIf(!amx)('give the VNNI kernels\' results bit for bit (the same int32 sums, the same epilogue): rows 1-197, K tails, N tails', () => {
    const file = bundle('test/support/int8_child.ts');
    const child = JSON.parse(execFileSync(process.execPath, [file], { env: { ...bundleEnv(), NF_AMX: '0' }, encoding: 'utf8' }).trim().split('\n').pop()!) as
      { kernels: string; ys: string[] };
    expect(child.kernels).toBe('vnni');
    int8KernelCases.forEach((c, i) => {
      const vnni = new Int32Array(new Uint8Array(Buffer.from(child.ys[i], 'base64')).buffer);
      const ours = runInt8KernelCase(c);
      expect(new Int32Array(ours.buffer), JSON.stringify(c)).toEqual(vnni);
    });
  });
});

describe("the int8 packing (packWeights, precision 'int8')", () => {
  const N = 70, K = 37, rows = 13;
  const r = rng(5), x = f32(randn32(rows * K, r)), W = f32(randn32(N * K, r, 0.2)), b = f32(randn32(N, r));
  const dims = { rows, inFeatures: K, outFeatures: N, act: 'gelu', precision: 'int8' } as const;
  const pack = () => {
    const packed = new Float32Array(packedSize(N, K, 'int8'));
    native.packWeights({ N, K, W, packed, precision: 'int8' });
    return packed;
  };

  it('is ISA-independent, and a product reading it gives the bits of one quantizing W per call, on every variant', () => {
    const packings = isas.map((isa) => withIsa(isa, pack));
    for (const p of packings) expect(p).toEqual(packings[0]);
    expect(packings[0].length).toBeLessThan(packedSize(N, K) / 3); // about a quarter of the float32 packing
    for (const isa of isas)
      withIsa(isa, () => {
        const perCall = new Float32Array(rows * N), packed = new Float32Array(rows * N);
        native.linearForward({ ...dims, x, W, b, y: perCall });
        native.linearForward({ ...dims, x, W, b, y: packed, WPacked: packings[0] });
        expect(new Int32Array(packed.buffer), isa).toEqual(new Int32Array(perCall.buffer));
      });
  });

  it('the variants agree: every one computes the same int32 sums (only the epilogue rounding may differ)', () => {
    const ys = isas.map((isa) => withIsa(isa, () => {
      const y = new Float32Array(rows * N);
      native.linearForward({ ...dims, x, W, b, y });
      return y;
    }));
    for (const y of ys) expect(relErr(y, ys[0])).toBeLessThan(1e-6);
  });

  it('is refused where a float32 packing is expected and the other way round, or for other dims, naming the field', () => {
    const y = new Float32Array(rows * N);
    const fp32 = new Float32Array(packedSize(N, K));
    native.packWeights({ N, K, W, packed: fp32 });
    expect(failure(() => native.linearForward({ ...dims, x, W, b, y, WPacked: fp32 }))?.message).toMatch(/WPacked/);
    expect(failure(() => native.linearForward({ ...dims, precision: 'fp32', x, W, b, y, WPacked: pack() }))?.message).toMatch(/WPacked/);
    const fake = new Float32Array(packedSize(N, K, 'int8'));
    expect(failure(() => native.linearForward({ ...dims, x, W, b, y, WPacked: fake }))?.message)
      .toMatch(/WPacked packed by packWeights with precision 'int8' but its header is not one of an int8 packing/);
    const other = new Float32Array(packedSize(N, K, 'int8'));
    native.packWeights({ N: 65, K: 37, W: W.subarray(0, 65 * 37), packed: other.subarray(0, packedSize(65, 37, 'int8')), precision: 'int8' });
    expect(failure(() => native.linearForward({ ...dims, x, W, b, y, WPacked: other }))?.message).toMatch(/of a weight \[70, 37\] but received one of \[65, 37\]/);
  });

  it('the ops that compute gradients, and the general gemm op, refuse int8 naming the op and the fix', () => {
    const e = failure(() => native.linearBackward({ rows, inFeatures: K, outFeatures: N, dy: new Float32Array(rows * N), x, W,
      dW: new Float32Array(N * K), precision: 'int8' }));
    expect(e?.code).toBe('ERR_NF_INVALID_ARG');
    expect(e?.message).toMatch(/linear_backward: precision 'int8' is CPU inference only .* use 'fp32'/);
    const g = failure(() => native.gemm({ M: 1, N: 1, K: 1, A: x.subarray(0, 1), B: x.subarray(0, 1), C: new Float32Array(1), precision: 'int8' }));
    expect(g?.message).toMatch(/gemm: precision 'int8' is CPU inference only/);
  });
});

describe("modules at precision 'int8'", () => {
  const small = { imgSize: 8, patchSize: 4, inChannels: 3, dModel: 32, numHeads: 4, dFF: 64, depth: 2, numClasses: 5, seed: 3 };
  const images = () => Tensor.from(f32(randn32(4 * 3 * 8 * 8, rng(9))), [4, 3, 8, 8]);

  it('a ViTClassifier in eval at int8 is close to fp32, prepacked or not bit for bit; back at fp32 it is fp32 again', () => {
    const m = new ViTClassifier(small).eval(), x = images();
    const fp32 = m.forward(x).toArray();
    m.setPrecision('int8');
    expect(m.modules().every((c) => c.precision === 'int8')).toBe(true);
    const packed = m.forward(x).toArray();
    setWeightPrepacking(false);
    const perCall = m.forward(x).toArray();
    setWeightPrepacking(true);
    expect(new Int32Array(packed.buffer)).toEqual(new Int32Array(perCall.buffer));
    const e = relErr(packed, fp32);
    console.log(`ViTClassifier logits, int8 against fp32: ${e.toExponential(2)}`);
    expect(e).toBeLessThan(5e-2);
    expect(e).toBeGreaterThan(1e-5);
    m.setPrecision('fp32');
    expect(m.forward(x).toArray()).toEqual(fp32);
    m.dispose();
  });

  it("training at int8 throws ERR_NF_STATE naming setPrecision('fp32'): backward, trainStep, fit", async () => {
    const m = new ViTClassifier({ ...small, precision: 'int8' }), x = images(), y = Tensor.from(Int32Array.from([0, 1, 2, 3]), [4]);
    const opt = new AdamW(m.parameters());
    const FIX = /precision 'int8' is for inference only; call setPrecision\('fp32'\) \(or 'bf16'\) before training/;
    for (const e of [failure(() => trainStep(m, opt, x, y)), failure(() => {
      const logits = m.forward(x);
      m.backward(crossEntropy(logits, y).grad);
    })]) {
      expect(e?.code).toBe('ERR_NF_STATE');
      expect(e?.message).toMatch(FIX);
    }
    await expect(fit(m, opt, [{ input: x, target: y }], { epochs: 1 })).rejects.toMatchObject({ code: 'ERR_NF_STATE', message: expect.stringMatching(FIX) });
    m.setPrecision('fp32');
    expect(Number.isFinite(trainStep(m, opt, x, y))).toBe(true);
    m.dispose();
  });

  it('a Linear made at int8 runs int8 products', () => {
    const l = new Linear({ inFeatures: 24, outFeatures: 10, precision: 'int8' }).eval();
    const x = Tensor.from(f32(randn32(5 * 24, rng(2))), [5, 24]);
    const q = l.forward(x).toArray();
    const f = l.setPrecision('fp32').forward(x).toArray();
    expect(relErr(q, f)).toBeGreaterThan(1e-5);
    expect(relErr(q, f)).toBeLessThan(2e-2);
    l.dispose();
  });
});
