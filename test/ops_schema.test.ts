/**
 * The op table (native/ops/): the addon's schema export, the TypeScript interface generated from
 * it (lib/native/ops.generated.ts must be current: `node scripts/gen_native_types.js` rewrites it),
 * supports(op, device) and the ops a module requests (what Module.to and the optimizers check
 * against the device, test/cuda_device.test.ts for 'cuda').
 */
import * as fs from 'node:fs';

import { describe, expect, it } from 'vitest';

import {
  AdamW, Encoder, Module, NodeformerError, SGD, Tensor, Transformer, ViTClassifier, ViTDecoder, crossEntropy, mse,
  supportedOps, supports,
} from '../lib/index';
import { checkSupported, MODULE_ENTRIES, OPTIMIZER_ENTRIES, requestedOps } from '../lib/device';
import { native } from '../lib/native';
import { OP_NAMES } from '../lib/native/ops.generated';
import type { Program } from '../lib/program';
import { randn32, rng } from './helpers';
import { opsCalledList } from './support/ops_called';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const gen = require('../scripts/gen_native_types.js') as { render(schema: unknown): string; target: string };

type Field = { name: string; kind: string; role?: string; dtype?: string; shape?: string; optional?: boolean };
type Op = { name: string; doc: string; fields: Field[]; reference: boolean };
const schema = JSON.parse(native.opSchema()) as Op[];

describe('the op schema', () => {
  it('lib/native/ops.generated.ts is what scripts/gen_native_types.js writes from the built addon', () => {
    const want = gen.render(schema);
    const have = fs.readFileSync(gen.target, 'utf8');
    expect(have === want, 'lib/native/ops.generated.ts is stale: run `node scripts/gen_native_types.js`').toBe(true);
  });

  it('lists every op the addon exports, each with its Async twin, a doc and typed fields', () => {
    expect(schema.map((o) => o.name)).toEqual([...OP_NAMES]);
    const fns = native as unknown as Record<string, unknown>;
    for (const op of schema) {
      expect(typeof fns[op.name], op.name).toBe('function');
      expect(typeof fns[`${op.name}Async`], op.name).toBe('function');
      expect(op.doc.length, op.name).toBeGreaterThan(10);
      expect(new Set(op.fields.map((f) => f.name)).size, `${op.name}: a field declared twice`).toBe(op.fields.length);
      for (const f of op.fields.filter((f) => f.kind === 'array')) {
        expect(['in', 'out', 'inout', 'saved']).toContain(f.role);
        expect(['real', 'f64', 'i32', 'u8']).toContain(f.dtype);
        expect(f.shape, `${op.name}.${f.name}`).toMatch(/^\[.+\]/);
      }
    }
    // Every op has a float64 twin but the two that are float32 only.
    expect(schema.filter((o) => !o.reference).map((o) => o.name).sort()).toEqual(['attentionDecode', 'fmaPeak']);
  });

  it('shapes name the fields that give them (a shape never shows a C++ member name)', () => {
    for (const op of schema) {
      const names = new Set(op.fields.map((f) => f.name));
      if (op.name.startsWith('patchEmbed')) names.add('N'); // N = (H/P)(W/P), named in the summary
      for (const f of op.fields.filter((f) => f.kind === 'array'))
        for (const d of f.shape!.replace(/\(.*?\)/g, '').match(/[A-Za-z_]\w*/g) ?? [])
          expect(names.has(d) || d === 'or', `${op.name}.${f.name} ${f.shape}: ${d}`).toBe(true);
    }
  });
});

describe('supports(op, device)', () => {
  it('the CPU runs every op of the table, and nothing else', () => {
    expect([...supportedOps('cpu')].sort()).toEqual([...OP_NAMES].sort());
    for (const op of OP_NAMES) expect(supports(op, 'cpu')).toBe(true);
    expect(supports('attentionForwardAsync', 'cpu')).toBe(false);
    expect(supports('notAnOp', 'cpu')).toBe(false);
  });

  it('checkSupported names every missing op and what needs it', () => {
    expect(() => checkSupported('cpu', ['add', 'gemm'], 'M')).not.toThrow();
    const err = (() => { try { checkSupported('cpu', ['add', 'zeta', 'alpha', 'zeta'], 'MyModel'); } catch (e) { return e; } })() as NodeformerError;
    expect(err).toBeInstanceOf(NodeformerError);
    expect(err.code).toBe('ERR_NF_DEVICE');
    expect(err.message).toBe('MyModel cannot run on cpu: the CPU backend has no kernel for alpha, zeta (ops it would run); keep it on cpu');
  });
});

const opsCalled = (fn: () => void) => new Set(opsCalledList(fn));

describe('the ops a module requests (what Module.to checks)', () => {
  const images = (B: number, C: number, S: number) => Tensor.from(Float32Array.from(randn32(B * C * S * S, rng(3))), [B, C, S, S]);
  const tokens = (B: number, T: number, V: number) => Tensor.from(Int32Array.from({ length: B * T }, (_, i) => (i * 7 + 1) % V), [B, T]);
  // The ops that modules request through helpers defined outside their classes, which the scan of
  // the classes' methods cannot see (lib/layers/dropout.ts's accumulate, used by the blocks). Every
  // backend has a kernel for these today; a class can list such ops in a static `nativeOps`.
  const unseen = new Set(['accumulate']);
  // The ops the cases run outside the model: the losses (free functions) and the optimizer (checked
  // by its own constructor); and packWeights, which an eval-mode Linear runs on the CPU only (through
  // a free function of lib/prepack.ts, so that Module.to does not ask 'cuda' for it).
  const outside = new Set(['crossEntropy', 'mse', 'adamwStep', 'packWeights']);

  const cases: { name: string; model: () => Module; run: (m: Module) => void; entries?: string[] }[] = [
    {
      name: 'ViTClassifier (forward, backward, AdamW)',
      model: () => new ViTClassifier({ imgSize: 8, patchSize: 4, inChannels: 3, dModel: 16, numHeads: 2, dFF: 24, depth: 1, numClasses: 3, dropout: 0.1, seed: 1 }),
      run: (m) => {
        const vit = m as ViTClassifier;
        const opt = new AdamW(vit.parameters());
        const { grad } = crossEntropy(vit.forward(images(2, 3, 8)), Tensor.from(Int32Array.from([0, 2]), [2]));
        vit.backward(grad);
        opt.step();
      },
    },
    {
      name: 'ViTDecoder (forward, backward)',
      model: () => new ViTDecoder({ imgSize: 8, patchSize: 4, inChannels: 1, dModel: 16, numHeads: 2, dFF: 24, depth: 1, dropout: 0.1, seed: 2 }),
      run: (m) => {
        const dec = m as ViTDecoder;
        const out = dec.forward(Tensor.from(Float32Array.from(randn32(2 * 3 * 16, rng(4))), [2, 3, 16]));
        dec.backward(mse(out, Tensor.zeros(out.shape, 'float32')).grad);
      },
    },
    {
      name: 'Transformer (forward, backward)',
      model: () => new Transformer({ srcVocab: 7, tgtVocab: 6, maxLen: 8, dModel: 16, numHeads: 2, dFF: 24, depth: 1, dropout: 0.1, seed: 3 }),
      run: (m) => {
        const t = m as Transformer;
        const logits = t.forward(tokens(2, 5, 7), tokens(2, 4, 6));
        t.backward(crossEntropy(logits, tokens(2, 4, 6)).grad);
      },
    },
    {
      name: 'Transformer (generate, with and without the cache)',
      model: () => new Transformer({ srcVocab: 7, tgtVocab: 6, maxLen: 8, dModel: 16, numHeads: 2, dFF: 24, depth: 1, seed: 3 }),
      run: (m) => {
        (m as Transformer).generate(tokens(2, 5, 7), { bos: 1, eos: 2, maxLen: 4 });
        (m as Transformer).generate(tokens(2, 5, 7), { bos: 1, eos: 2, maxLen: 4, useCache: false });
      },
      entries: ['generateOps'],
    },
    {
      name: 'Encoder (learned positions)',
      model: () => new Encoder({ vocabSize: 9, maxLen: 8, dModel: 16, numHeads: 2, dFF: 24, depth: 1, positional: 'learned', seed: 4 }),
      run: (m) => {
        const e = m as Encoder;
        const y = e.forward(tokens(2, 6, 9));
        e.backward(Tensor.from(new Float32Array(y.size).fill(0.1), y.shape));
      },
    },
  ];

  for (const c of cases)
    it(`${c.name}: every op it runs is one it requests`, () => {
      const model = c.model();
      const requested = requestedOps(model.modules(), c.entries ?? MODULE_ENTRIES);
      const ran = opsCalled(() => c.run(model));
      const missed = [...ran].filter((op) => !requested.has(op) && !unseen.has(op) && !outside.has(op));
      expect(missed, `ops ${c.name} ran without requesting them`).toEqual([]);
      expect(ran.size).toBeGreaterThan(3);
    });

  it("a training step's ops leave out generation's decode step (a ViT does not request it)", () => {
    const vit = new ViTClassifier({ imgSize: 8, patchSize: 4, dModel: 16, numHeads: 2, dFF: 24, depth: 1, numClasses: 3 });
    const ops = requestedOps(vit.modules(), MODULE_ENTRIES);
    expect(ops.has('attentionForward') && ops.has('attentionBackward') && ops.has('patchEmbedBackward')).toBe(true);
    expect(ops.has('attentionDecode')).toBe(false);
    const t = new Transformer({ srcVocab: 5, tgtVocab: 5, maxLen: 6, dModel: 16, numHeads: 2, dFF: 24, depth: 1 });
    expect(requestedOps(t.modules(), MODULE_ENTRIES).has('attentionDecode')).toBe(false);
    expect(requestedOps(t.modules(), ['generateOps']).has('attentionDecode')).toBe(true);
  });

  it('optimizers request their step and zeroGrad ops', () => {
    const p = new ViTClassifier({ imgSize: 4, patchSize: 4, inChannels: 1, dModel: 8, numHeads: 1, dFF: 8, depth: 1, numClasses: 2 }).parameters();
    expect([...requestedOps([new AdamW(p)], OPTIMIZER_ENTRIES)].sort()).toEqual(['adamwStep', 'zero']);
    expect([...requestedOps([new SGD(p, { momentum: 0.9 })], OPTIMIZER_ENTRIES)].sort()).toEqual(['sgdStep', 'zero']);
  });

  it('a class lists the ops its helpers request in a static nativeOps', () => {
    class Helper extends Module {
      static readonly nativeOps = ['fmaPeak'];
      *forwardProgram(): Program<void> {}
      *backwardProgram(): Program<void> {}
    }
    expect([...requestedOps([new Helper()], MODULE_ENTRIES)]).toEqual(['fmaPeak']);
  });
});
