/**
 * Dropout per site and stochastic depth (timm's placement), and Transformer's maskTargetPadding.
 */
import { describe, expect, it } from 'vitest';

import { EncoderBlock } from '../lib/layers/blocks';
import { paddingMask, Transformer } from '../lib/models/seq2seq';
import { Tensor } from '../lib/core/tensor';
import { randn32, rng } from './helpers';

const D = 12, T = 5;

function input(B: number, seed: number): Tensor<'float32'> {
  return Tensor.from(Float32Array.from(randn32(B * T * D, rng(seed))), [B, T, D]);
}

describe('drop path (stochastic depth)', () => {
  for (const normFirst of [true, false])
    it(`drops whole samples' branches in training (${normFirst ? 'pre' : 'post'}-LN) and passes their gradient through`, () => {
      const B = 64, p = 0.7;
      const blk = new EncoderBlock({ dModel: D, numHeads: 3, dFF: 20, normFirst, dropPath: p, initValues: normFirst ? 0.5 : 0, seed: 5 });
      const ref = new EncoderBlock({ dModel: D, numHeads: 3, dFF: 20, normFirst, initValues: normFirst ? 0.5 : 0, seed: 5 });
      ref.loadStateDict(blk.stateDict());
      const x = input(B, 1), dy = input(B, 2);
      blk.train();
      const y = blk.forward(x), dx = blk.backward(dy);
      ref.eval();
      const full = ref.forward(x);
      const row = (t: Tensor<'float32'>, b: number) => Array.from(t.data.subarray(b * T * D, (b + 1) * T * D));
      // Both branches dropped: pre-LN y = x; post-LN y = norm2(norm1(x)) (x + 0 normalised twice).
      const n1 = normFirst ? null : blk.norm1.forward(x), bare = normFirst ? x : blk.norm2.forward(n1!);
      let bothDropped = 0;
      for (let b = 0; b < B; b++)
        if (row(y, b).every((v, i) => v === row(bare, b)[i])) {
          bothDropped++;
          if (normFirst) expect(row(dx, b)).toEqual(row(dy, b)); // the gradient passes the residual path alone
        }
      expect(bothDropped).toBeGreaterThan(B * p * p * 0.4); // about 31 of 64
      expect(bothDropped).toBeLessThan(B * (p * p + (1 - p * p) * 0.5));
      if (!normFirst) for (const t of [n1!, bare]) t.dispose();
      blk.eval();
      const evalOut = blk.forward(x);
      expect(Array.from(evalOut.data)).toEqual(Array.from(full.data)); // inactive outside training
      for (const t of [x, dy, y, dx, full, evalOut]) t.dispose();
      blk.dispose();
      ref.dispose();
    });

  it('checks the rate and keeps the sites apart', () => {
    expect(() => new EncoderBlock({ dModel: D, numHeads: 3, dFF: 8, dropPath: 1 })).toThrow(/config\.dropPath/);
    const blk = new EncoderBlock({ dModel: D, numHeads: 3, dFF: 8, dropout: 0.1, attnDropout: 0.2, hiddenDropout: 0 });
    expect([blk.attn.config.dropout, blk.mlp.config.dropout, blk.config.projDropout]).toEqual([0.2, 0, 0.1]);
    blk.dispose();
  });
});

describe('Transformer maskTargetPadding', () => {
  it('false masks the target causally only: the decoder without a target padding mask', () => {
    const cfg = { srcVocab: 9, tgtVocab: 7, maxLen: 8, dModel: 12, numHeads: 2, dFF: 16, depth: 1, seed: 3, padIdx: 0 };
    const src = Tensor.from(Int32Array.from([3, 4, 5, 0, 0, 6, 7, 8, 2, 1]), [2, 5]);
    const tgt = Tensor.from(Int32Array.from([1, 0, 4, 5, 2, 3, 0, 0]), [2, 4]); // padding inside and at the end
    const off = new Transformer({ ...cfg, maskTargetPadding: false }), on = new Transformer(cfg);
    off.eval();
    on.eval();
    const a = off.forward(src, tgt), b = on.forward(src, tgt);
    const srcPad = paddingMask(src, 0);
    const memory = off.encoder.forward(src, { keyPaddingMask: srcPad });
    const c = off.decoder.forward(tgt, memory, { memoryKeyPaddingMask: srcPad });
    expect(Array.from(a.data)).toEqual(Array.from(c.data));
    expect(Array.from(a.data)).not.toEqual(Array.from(b.data));
    expect(() => new Transformer({ ...cfg, maskTargetPadding: 1 as never })).toThrow(/config\.maskTargetPadding/);
    for (const t of [src, tgt, a, b, srcPad, memory, c]) t.dispose();
    off.dispose();
    on.dispose();
  });
});
