/**
 * Fine-tuning controls (issue 14): freezing (Parameter.requiresGrad, Module.requiresGrad), parameter
 * groups (PyTorch's param_groups, paramGroups() with timm's no-decay and layer-decay conventions)
 * and gradient accumulation in trainStep, each checked against the plain equivalent.
 */
import { describe, expect, it } from 'vitest';

import { AdamW, crossEntropy, paramGroups, SGD, Tensor, trainStep, trainStepAsync, ViTClassifier, type Parameter } from '../lib/index';
import { randn32, relErr, rng } from './helpers';
import { opsCalledList } from './support/ops_called';

const config = { imgSize: 12, patchSize: 4, inChannels: 3, dModel: 20, numHeads: 2, dFF: 28, depth: 3, numClasses: 5 };
const images = (n: number, seed: number) => Tensor.from(Float32Array.from(randn32(n * 3 * 144, rng(seed))), [n, 3, 12, 12]);
const labels = (values: number[]) => Tensor.from(Int32Array.from(values), [values.length]);
const param = (m: ViTClassifier, name: string) => m.namedParameters().find(([n]) => n === name)![1];
const named = (m: ViTClassifier) => Object.fromEntries(m.namedParameters().map(([n, p]) => [n, p.toArray()]));

describe('freezing', () => {
  it('frozen parameters get no gradient, no update and no arena slot; the rest train as without freezing', async () => {
    const frozen = new ViTClassifier({ ...config, seed: 1 }), full = new ViTClassifier({ ...config, seed: 1 });
    frozen.requiresGrad(false);
    for (const p of [param(frozen, 'head.weight'), param(frozen, 'head.bias')]) p.requiresGrad = true;
    const before = named(frozen);
    const opt = new AdamW(frozen.parameters(), { lr: 0.01 }), optFull = new AdamW(full.parameters(), { lr: 0.01 });
    const x = images(4, 2), y = labels([1, 4, 0, 2]);
    const ops = opsCalledList(() => trainStep(frozen, opt, x, y));
    expect(ops.filter((o) => o === 'adamwStep')).toHaveLength(1);
    await trainStepAsync(frozen, opt, x, y);
    trainStep(full, optFull, x, y);
    await trainStepAsync(full, optFull, x, y);
    const after = named(frozen), afterFull = named(full);
    for (const [name, p] of frozen.namedParameters()) {
      if (name.startsWith('head.')) {
        expect(p.grad, name).not.toBeNull();
        expect(after[name], name).not.toEqual(before[name]);
      } else {
        expect(p.grad, name).toBeNull();
        expect(after[name], name).toEqual(before[name]);
      }
    }
    // The head's first update saw the same gradient in both models (the body is the same before it).
    const oneStep = new ViTClassifier({ ...config, seed: 1 }), oneFull = new ViTClassifier({ ...config, seed: 1 });
    oneStep.requiresGrad(false);
    param(oneStep, 'head.weight').requiresGrad = true;
    trainStep(oneStep, new AdamW(oneStep.parameters(), { lr: 0.01 }), x, y);
    trainStep(oneFull, new AdamW(oneFull.parameters(), { lr: 0.01 }), x, y);
    expect(named(oneStep)['head.weight']).toEqual(named(oneFull)['head.weight']);
    expect(afterFull['head.weight']).not.toEqual(before['head.weight']);
  });

  it('freezing and unfreezing between steps (after the optimizer exists) is honoured', () => {
    const m = new ViTClassifier({ ...config, seed: 3 });
    const opt = new SGD(m.parameters(), { lr: 0.1, momentum: 0.9 });
    const x = images(3, 4), y = labels([0, 1, 2]);
    trainStep(m, opt, x, y);
    const block = param(m, 'blocks.0.attn.qkv.weight');
    block.requiresGrad = false;
    const held = block.toArray();
    trainStep(m, opt, x, y);
    expect(block.toArray()).toEqual(held);
    block.requiresGrad = true;
    trainStep(m, opt, x, y);
    expect(block.toArray()).not.toEqual(held);
    expect(() => m.requiresGrad('no' as never)).toThrow(expect.objectContaining({ code: 'ERR_NF_INVALID_ARG' }));
  });
});

describe('parameter groups', () => {
  it('an optimizer over groups equals one optimizer per group, with their options', () => {
    const a = new ViTClassifier({ ...config, seed: 5 }), b = new ViTClassifier({ ...config, seed: 5 });
    const split = (m: ViTClassifier) => {
      const ps = m.namedParameters();
      return [ps.filter(([n]) => !n.startsWith('blocks.')).map(([, p]) => p), ps.filter(([n]) => n.startsWith('blocks.')).map(([, p]) => p)];
    };
    const [a0, a1] = split(a), [b0, b1] = split(b);
    const grouped = new AdamW([{ params: a0, weightDecay: 0 }, { params: a1, lr: 0.02, lrScale: 0.5 }], { lr: 0.003, weightDecay: 0.1 });
    const first = new AdamW(b0, { lr: 0.003, weightDecay: 0 }), second = new AdamW(b1, { lr: 0.01, weightDecay: 0.1 });
    for (let s = 0; s < 3; s++) {
      const x = images(4, 10 + s), y = labels([s, 1, 2, 3]);
      const opsA = opsCalledList(() => trainStep(a, grouped, x, y));
      expect(opsA.filter((o) => o === 'adamwStep')).toHaveLength(2);
      b.zeroGrad();
      const out = b.forward(x);
      b.backward(crossEntropy(out, y).grad);
      first.step();
      second.step();
      expect(named(a)).toEqual(named(b));
    }
    const state = grouped.stateDict();
    expect(state.groups).toEqual([{ weightDecay: 0, lrScale: 1 }, { lr: 0.02, lrScale: 0.5 }]);
    grouped.loadStateDict(state);
  });

  it('rejects misspelled group options, duplicate parameters and bad scales', () => {
    const m = new ViTClassifier({ ...config, seed: 6 });
    const ps = m.parameters();
    const err = (f: () => unknown) => {
      try {
        f();
      } catch (e) {
        return e as Error & { code: string };
      }
      throw new Error('expected an error');
    };
    expect(err(() => new AdamW([{ params: ps, weight_decay: 0 } as never])).message).toMatch(/weight_decay.*weightDecay/s);
    expect(err(() => new AdamW([{ params: ps }, { params: [ps[0]] }])).message).toMatch(/one group only/);
    expect(err(() => new SGD([{ params: ps, lrScale: -1 }])).message).toMatch(/params\[0\]\.lrScale/);
    expect(err(() => new AdamW([{ params: [] }])).code).toBe('ERR_NF_INVALID_ARG');
  });

  it('paramGroups: no decay for biases, norms and embeddings; layer-wise lr decay as timm', () => {
    const m = new ViTClassifier({ ...config, seed: 7 });
    const nameOf = new Map<Parameter, string>(m.namedParameters().map(([n, p]) => [p, n]));
    const groups = paramGroups(m, { layerDecay: 0.5, weightDecay: 0.05 });
    const table = groups.map((g) => ({ names: g.params.map((p) => nameOf.get(p)!), weightDecay: g.weightDecay, lrScale: g.lrScale }));
    const find = (name: string) => table.find((g) => g.names.includes(name))!;
    // depth 3: embeddings layer 0 (0.5^4), blocks.i layer i + 1 (0.5^(3 − i)), norm and head layer 4 (1).
    expect(find('cls_token')).toMatchObject({ weightDecay: 0, lrScale: 0.0625 });
    expect(find('patch_embed.proj.weight')).toMatchObject({ weightDecay: 0.05, lrScale: 0.0625 });
    expect(find('blocks.0.attn.qkv.weight')).toMatchObject({ weightDecay: 0.05, lrScale: 0.125 });
    expect(find('blocks.2.norm1.weight')).toMatchObject({ weightDecay: 0, lrScale: 0.5 });
    expect(find('head.weight')).toMatchObject({ weightDecay: 0.05, lrScale: 1 });
    expect(find('head.bias')).toMatchObject({ weightDecay: 0, lrScale: 1 });
    expect(table.reduce((n, g) => n + g.names.length, 0)).toBe(m.parameters().length);
    const plain = paramGroups(m);
    expect(plain).toHaveLength(2);
    expect(plain.map((g) => g.weightDecay)).toEqual([0, undefined].sort() as never);
    m.requiresGrad(false);
    param(m, 'head.weight').requiresGrad = true;
    expect(paramGroups(m).flatMap((g) => g.params)).toEqual([param(m, 'head.weight')]);
    trainStep(m, new AdamW(paramGroups(m, { layerDecay: 0.75 })), images(2, 1), labels([0, 1]));
    expect(() => paramGroups(m, { layerDecays: 0.5 } as never)).toThrow(/layerDecay/);
  });
});

describe('gradient accumulation', () => {
  it('accumulate k over k batches equals one step over their concatenation; the loss is each batch\'s', async () => {
    const acc = new ViTClassifier({ ...config, seed: 8 }), big = new ViTClassifier({ ...config, seed: 8 });
    // SGD: linear in the gradient (AdamW would magnify the rounding noise of gradients that are 0 in exact
    // arithmetic, such as the key bias's).
    const optAcc = new SGD(acc.parameters(), { lr: 0.1, momentum: 0.9 }), optBig = new SGD(big.parameters(), { lr: 0.1, momentum: 0.9 });
    const xs = [images(2, 20), images(2, 21), images(2, 22)], ys = [labels([0, 1]), labels([2, 3]), labels([4, 0])];
    const before = named(acc);
    const l0 = trainStep(acc, optAcc, xs[0], ys[0], { accumulate: 3 });
    const l1 = await trainStepAsync(acc, optAcc, xs[1], ys[1], { accumulate: 3 });
    expect(named(acc)).toEqual(before); // no update before the third batch
    const l2 = trainStep(acc, optAcc, xs[2], ys[2], { accumulate: 3 });
    const cat = Tensor.from(Float32Array.from([...xs[0].data, ...xs[1].data, ...xs[2].data]), [6, 3, 12, 12]);
    const lBig = trainStep(big, optBig, cat, labels([0, 1, 2, 3, 4, 0]));
    expect(Math.abs((l0 + l1 + l2) / 3 - lBig)).toBeLessThan(1e-5);
    const a = named(acc), b = named(big);
    for (const name of Object.keys(a)) expect(relErr(a[name], b[name]), name).toBeLessThan(1e-5);
    expect(() => trainStep(acc, optAcc, xs[0], ys[0], { accumulate: 0 })).toThrow(/options.accumulate/);
    expect(() => trainStep(acc, optAcc, xs[0], ys[0], { acumulate: 2 } as never)).toThrow(/accumulate/);
  });
});

describe('a new head', () => {
  it('resetClassifier replaces the head for a new number of classes and keeps the rest', async () => {
    const m = new ViTClassifier({ ...config, seed: 9 });
    const body = named(m);
    m.resetClassifier(7, { seed: 3 });
    expect(m.numClasses).toBe(7);
    expect(m.config.numClasses).toBe(7);
    expect(m.forward(images(2, 1)).shape).toEqual([2, 7]);
    const after = named(m);
    for (const name of Object.keys(body)) if (!name.startsWith('head.')) expect(after[name], name).toEqual(body[name]);
    expect(after['head.weight']).toHaveLength(7 * config.dModel);
    trainStep(m, new AdamW(m.parameters()), images(2, 2), labels([6, 0]));
    expect(() => m.resetClassifier(0)).toThrow(/numClasses/);
    const pending = trainStepAsync(m, new AdamW(m.parameters()), images(2, 3), labels([1, 2]));
    expect(() => m.resetClassifier(3)).toThrow(expect.objectContaining({ code: 'ERR_NF_STATE' }));
    await pending;
  });

  it('the fine-tuning example (examples/finetune.ts) runs end to end on a small budget', async () => {
    const { runFinetune } = await import('../examples/finetune');
    const lines: string[] = [];
    const r = await runFinetune({ pretrainEpochs: 1, epochs: 1, trainSize: 96, testSize: 40, trainBlocks: 1, batchSize: 16, seed: 1 }, (l) => lines.push(l));
    expect(lines).toHaveLength(4);
    expect(r.trainable).toBeLessThan(r.total / 2);
    for (const a of [r.pretrained, r.before, r.after, r.scratch]) expect(a).toBeGreaterThanOrEqual(0);
  }, 60_000);
});
