/**
 * Flat parameter, gradient and optimizer-state arenas (lib/training/arena.ts): what the optimizers build on
 * the CPU, so that zeroGrad and a step are one native op each (issue 12's llm.c-style
 * params_memory). Checked here: the layout (one buffer each, 64-byte aligned slices, values and
 * parameter identity kept), the op count of a training step, that the flat update equals the
 * per-parameter one, and that the arenas are rebuilt when a tensor leaves its slice.
 */
import { describe, expect, it } from 'vitest';

import {
  AdamW, clipGradNorm, crossEntropy, Parameter, SGD, Tensor, trainStep, trainStepAsync, ViTClassifier, type Optimizer,
} from '../lib/index';
import { native } from '../lib/native/addon';
import { randn32, relErr, rng } from './helpers';
import { opsCalledList } from './support/ops_called';

const config = { imgSize: 12, patchSize: 4, inChannels: 3, dModel: 20, numHeads: 2, dFF: 28, depth: 2, numClasses: 5 };
const images = (seed: number) => Tensor.from(Float32Array.from(randn32(6 * 3 * 144, rng(seed))), [6, 3, 12, 12]);
const labels = Tensor.from(Int32Array.from([0, 3, 1, 4, 2, 2]), [6]);
const values = (m: ViTClassifier) => m.parameters().map((p) => p.toArray());

describe('flat arenas of an optimizer', () => {
  it('puts every parameter and gradient in one 64-byte-aligned buffer each, keeping values and identity', () => {
    const model = new ViTClassifier({ ...config, seed: 1 });
    const before = values(model), params = model.parameters();
    new AdamW(params);
    expect(model.parameters()).toEqual(params);
    expect(values(model)).toEqual(before);
    for (const list of [params.map((p) => p.data), params.map((p) => p.grad!.data)]) {
      expect(new Set(list.map((a) => a.buffer)).size).toBe(1);
      for (const a of list) expect((a.byteOffset - list[0].byteOffset) % 64).toBe(0);
      expect((list[0].byteOffset - native.alignedOffset(list[0].buffer as ArrayBuffer)) % 64).toBe(0);
      const ends = list.map((a) => [a.byteOffset, a.byteOffset + a.byteLength]).sort((x, y) => x[0] - y[0]);
      for (let i = 1; i < ends.length; i++) expect(ends[i][0]).toBeGreaterThanOrEqual(ends[i - 1][1]);
    }
    expect(params.every((p) => p.grad!.data.every((v) => v === 0))).toBe(true);
  });

  it('a training step is one zero, one forward/backward and one optimizer op (not one per parameter)', () => {
    for (const make of [(ps: Parameter[]) => new AdamW(ps), (ps: Parameter[]) => new SGD(ps, { momentum: 0.9 })]) {
      const model = new ViTClassifier({ ...config, seed: 2 });
      const opt = make(model.parameters());
      const ops = opsCalledList(() => trainStep(model, opt, images(3), labels));
      expect(ops.filter((o) => o === 'zero')).toHaveLength(1);
      expect(ops.filter((o) => o === 'adamwStep' || o === 'sgdStep')).toHaveLength(1);
      expect(ops[0]).toBe('zero');
      expect(model.parameters().length).toBeGreaterThan(20);
    }
  });

  it('the flat update equals the per-parameter one (AdamW and SGD), sync and async', async () => {
    for (const make of [(ps: Parameter[]) => new AdamW(ps, { lr: 0.01 }), (ps: Parameter[]) => new SGD(ps, { lr: 0.05, momentum: 0.9, nesterov: true })]) {
      const flat = new ViTClassifier({ ...config, seed: 4 }), split = new ViTClassifier({ ...config, seed: 4 });
      const optFlat = make(flat.parameters()), optSplit: Optimizer = make(split.parameters());
      // Unequal step counts keep an optimizer on its per-parameter path (as after loading such a
      // state): parameter 0 of the split side steps from 1, the others from 0 as on the flat side.
      const state = optSplit.stateDict();
      state.state[0].step = 1;
      optSplit.loadStateDict(state);
      const perParam = opsCalledList(() => trainStep(split, optSplit, images(9), labels));
      // (Off the arenas AdamW runs one adamwMultiStep per step count, here 2; SGD one sgdStep per parameter.)
      expect(perParam.filter((o) => o === 'adamwMultiStep' || o === 'sgdStep').length).toBe(optSplit instanceof AdamW ? 2 : split.parameters().length);
      trainStep(flat, optFlat, images(9), labels);
      for (let s = 0; s < 3; s++) {
        split.parameters()[0].copyFrom(flat.parameters()[0].toArray()); // the one parameter whose step differs
        const x = images(10 + s);
        const [a, b] = s === 1
          ? [await trainStepAsync(flat, optFlat, x, labels), await trainStepAsync(split, optSplit, x, labels)]
          : [trainStep(flat, optFlat, x, labels), trainStep(split, optSplit, x, labels)];
        expect(a).toBe(b);
        const pf = values(flat), ps = values(split);
        for (let i = 1; i < pf.length; i++) expect(pf[i], `parameter ${i} after step ${s}`).toEqual(ps[i]);
      }
    }
  });

  it('rebuilds the arenas when a tensor leaves its slice, and frees its state arenas on dispose', () => {
    const model = new ViTClassifier({ ...config, seed: 5 });
    const opt = new AdamW(model.parameters());
    trainStep(model, opt, images(20), labels);
    const p0 = model.parameters()[0];
    p0.grad = Tensor.zeros(p0.shape, 'float32'); // a gradient replaced from outside
    const before = values(model);
    const ops = opsCalledList(() => trainStep(model, opt, images(21), labels));
    expect(ops.filter((o) => o === 'adamwStep')).toHaveLength(1);
    expect(values(model)).not.toEqual(before);
    expect(new Set(model.parameters().map((p) => p.grad!.data.buffer)).size).toBe(1);
    opt.dispose();
    expect(model.parameters().every((p) => !p.disposed && p.data.length === p.size)).toBe(true);
    expect(() => opt.step()).toThrow();
  });

  it('gradient clipping in trainStep is one fused op over the arena, equal to clipGradNorm over the parameters', () => {
    const a = new ViTClassifier({ ...config, seed: 6 }), b = new ViTClassifier({ ...config, seed: 6 });
    const optA = new SGD(a.parameters(), { lr: 0.1 }), optB = new SGD(b.parameters(), { lr: 0.1 });
    const x = images(30);
    const ops = opsCalledList(() => trainStep(a, optA, x, labels, { maxGradNorm: 0.05 }));
    expect(ops.filter((o) => o === 'clipGradNorm')).toHaveLength(1);
    expect(ops.filter((o) => o === 'sumSquares')).toHaveLength(0);
    optB.zeroGrad();
    b.backward(crossEntropy(b.forward(x), labels).grad);
    expect(clipGradNorm(b.parameters(), 0.05)).toBeGreaterThan(0.05);
    optB.step();
    const pa = values(a), pb = values(b);
    for (let i = 0; i < pa.length; i++) expect(relErr(pa[i], pb[i]), `parameter ${i}`).toBeLessThan(1e-6);
  });
});
