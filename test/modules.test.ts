/**
 * Every module against the PyTorch fixtures (test/fixtures): forward outputs within 1e-5 and
 * input and parameter gradients within 1e-4 relative error of the float64 reference.
 */
import { afterAll, describe, expect, it } from 'vitest';

import { LayerNorm } from '../lib/layers/layernorm';
import type { Module } from '../lib/module';
import { Tensor } from '../lib/tensor';
import { loadFixture, type Fixture } from './fixture';
import { ErrorLog, relErr } from './helpers';

const fwdLog = new ErrorLog(1e-5), bwdLog = new ErrorLog(1e-4);
afterAll(() => {
  fwdLog.report('modules vs PyTorch, forward');
  bwdLog.report('modules vs PyTorch, gradients');
});

/** Checks every parameter gradient of `m` against the fixture's grad.param.*. */
function expectParamGrads(label: string, m: Module, fx: Fixture) {
  for (const [name, p] of m.namedParameters()) {
    expect(p.grad, `${name}.grad`).not.toBeNull();
    expect(bwdLog.add(`${label} param grads`, relErr(p.grad!.toArray(), fx.f64(`grad.param.${name}`))), name).toBeLessThan(1e-4);
  }
}

describe('LayerNorm', () => {
  it('matches torch.nn.LayerNorm (eps 1e-6)', () => {
    const fx = loadFixture('layernorm');
    const m = new LayerNorm(fx.config as { dModel: number; eps: number });
    m.loadStateDict(fx.params);
    const y = m.forward(fx.input('x'));
    expect(fwdLog.add('LayerNorm', relErr(y.toArray(), fx.f64('output.y')))).toBeLessThan(1e-5);
    const dx = m.backward(fx.input('dy'));
    expect(bwdLog.add('LayerNorm dx', relErr(dx.toArray(), fx.f64('grad.x')))).toBeLessThan(1e-4);
    expectParamGrads('LayerNorm', m, fx);
    expect(() => m.forward(Tensor.zeros([2, 3]))).toThrow(/Expected a float32 Tensor of rank >= 1 whose last dimension is 20 for x/);
  });
});
