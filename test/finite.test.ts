/**
 * The finite scan (native firstNonFinite, every ISA variant against its reference twin) and
 * checkFinite mode on modules: off, NaN flows through silently as in PyTorch; on, the first
 * non-finite tensor entering or leaving a module is named.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';

import { AdamW, checkFiniteEnabled, crossEntropy, LayerNorm, Linear, mse, native, setCheckFinite, Tensor, ViTClassifier } from '../lib';
import { isas, rng, withIsa } from './helpers';

function scan(x: Float32Array | Float64Array): number {
  const index = new Float64Array(1);
  native.firstNonFinite({ n: x.length, x, index });
  return index[0];
}

const lengths = [0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 100, 16384, 16389, 3 * 16384 + 11, 200_003];
const signallingNaN = new Float32Array(Uint32Array.of(0xff800001).buffer)[0];

describe.each(isas)('firstNonFinite (%s)', (isa) => {
  it.each(lengths)('n = %i: every position, value and tail agrees with the reference', (n) => {
    const r = rng(n + 1);
    const x = Float32Array.from({ length: n }, () => (r() - 0.5) * 1e30);
    withIsa(isa, () => expect(scan(x)).toBe(-1));
    const positions = [0, n - 1, Math.floor(n / 2), n - (n % 16) - 1, 16383, 16384, Math.floor(r() * n)];
    for (const p of new Set(positions.filter((q) => q >= 0 && q < n)))
      for (const v of [NaN, Infinity, -Infinity, signallingNaN]) {
        const y = x.slice();
        y[p] = v;
        if (p + 3 < n) y[p + 3] = NaN; // a later one must not win
        expect(scan(Float64Array.from(y))).toBe(p); // the reference twin
        withIsa(isa, () => expect(scan(y), `${isa} n=${n} p=${p} v=${v}`).toBe(p));
      }
  });
});

describe('firstNonFinite', () => {
  it('treats the largest finite floats, zeros and subnormals as finite', () => {
    const x = Float32Array.of(3.4028234663852886e38, -3.4028234663852886e38, 0, -0, 1e-45, -1e-45, 1.17e-38);
    for (const isa of isas) withIsa(isa, () => expect(scan(x)).toBe(-1));
    expect(scan(Float64Array.from(x))).toBe(-1);
  });

  it('finds the first of many in a large array on the thread pool, and has an Async twin', async () => {
    const x = new Float32Array(1 << 22);
    for (const p of [4_000_001, 3_000_000, 2_999_999]) x[p] = NaN;
    expect(scan(x)).toBe(2_999_999);
    const index = new Float64Array(1);
    await native.firstNonFiniteAsync({ n: x.length, x, index });
    expect(index[0]).toBe(2_999_999);
  });
});

describe('checkFinite mode', () => {
  afterEach(() => setCheckFinite(false));

  it('is off by default: NaN flows through a module', () => {
    expect(checkFiniteEnabled()).toBe(false);
    const y = new LayerNorm({ dModel: 4 }).forward(Tensor.from(Float32Array.of(1, NaN, 3, 4), [1, 4]));
    expect(Number.isNaN(y.data[0])).toBe(true);
  });

  it('names a NaN input, with its position', () => {
    setCheckFinite(true);
    const x = Tensor.from(Float32Array.of(1, 2, 3, NaN), [2, 2]);
    expect(() => new Linear({ inFeatures: 2, outFeatures: 3 }).forward(x)).toThrow(
      /^Expected finite values for argument 1 \(input of Linear\.forward\) but received Tensor float32 \[2, 2\] holding NaN at flat index 3$/);
  });

  it('names the first layer whose output is not finite, by its path in the model', () => {
    setCheckFinite(true);
    const model = new ViTClassifier({ imgSize: 8, patchSize: 4, inChannels: 1, dModel: 8, numHeads: 2, dFF: 16, depth: 2, numClasses: 3 });
    const images = Tensor.from(new Float32Array(64).fill(1), [1, 1, 8, 8]);
    model.forward(images); // finite: no error
    model.blocks[1].mlp.fc2.weight.data.fill(3e38); // finite weights whose products overflow
    let err: Error | undefined;
    try {
      model.forward(images);
    } catch (e) {
      err = e as Error;
    }
    expect((err as { code?: string }).code).toBe('ERR_NF_NOT_FINITE');
    expect(err!.message).toMatch(/^Expected finite values for the output of ViTClassifier\.blocks\.1\.mlp\.forward/);
  });

  it('checks the gradients after backward, naming the parameter', () => {
    const lin = new Linear({ inFeatures: 2, outFeatures: 2 });
    lin.weight.data.fill(0.01); // dx = dy W stays finite; dW = dyᵀ x overflows
    lin.forward(Tensor.from(Float32Array.of(3e38, 3e38), [1, 2]));
    setCheckFinite(true);
    expect(() => lin.backward(Tensor.from(Float32Array.of(3e38, 3e38), [1, 2]))).toThrow(/for gradient Linear\.weight\.grad/);
  });

  it('checks the inputs of the losses', () => {
    setCheckFinite(true);
    const logits = Tensor.from(Float32Array.of(0, Infinity, 1, 2), [2, 2]), targets = Tensor.from(Int32Array.of(0, 1), [2]);
    expect(() => crossEntropy(logits, targets)).toThrow(/^Expected finite values for logits but received .* holding Infinity at flat index 1$/);
    const pred = Tensor.from(Float32Array.of(1, 2), [1, 2]), target = Tensor.from(Float32Array.of(NaN, 0), [1, 2]);
    expect(() => mse(pred, target)).toThrow(/^Expected finite values for target but received/);
  });

  it('checks every gradient before the optimizer updates any parameter', () => {
    const a = new Linear({ inFeatures: 2, outFeatures: 2 }), b = new Linear({ inFeatures: 2, outFeatures: 2 });
    const params = [...a.parameters(), ...b.parameters()];
    for (const p of params) p.gradData();
    for (const p of params) p.grad!.data.fill(0.5);
    params[2].grad!.data[1] = NaN; // b.weight
    const before = params.map((p) => Array.from(p.toArray()));
    const opt = new AdamW(params);
    setCheckFinite(true);
    expect(() => opt.step()).toThrow(/^Expected finite values for the gradient of optimizer parameter 2 but received .* holding NaN at flat index 1$/);
    expect(params.map((p) => Array.from(p.toArray()))).toEqual(before); // nothing was updated
  });

  it('is turned on by NF_CHECK_FINITE=1 in the environment', async () => {
    vi.stubEnv('NF_CHECK_FINITE', '1');
    vi.resetModules();
    try {
      const fresh = await import('../lib/core/finite');
      expect(fresh.checkFiniteEnabled()).toBe(true);
    } finally {
      vi.unstubAllEnvs();
    }
  });
});
