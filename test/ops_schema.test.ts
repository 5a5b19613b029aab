/**
 * The op table (native/ops/): the addon's schema export, the TypeScript interface generated from
 * it (lib/native/ops.generated.ts must be current: `node scripts/gen_native_types.js` rewrites it),
 * supports(op, device) and the ops a module declares (what Module.to and the optimizers check
 * against the device, test/cuda_device.test.ts for 'cuda').
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

import { describe, expect, it } from 'vitest';

import {
  AdamW, Encoder, Module, NodeformerError, SGD, Tensor, Transformer, ViTClassifier, ViTDecoder, ViTEncoder, crossEntropy, mse,
  supportedOps, supports,
} from '../lib/index';
import { checkSupported, declaredOps } from '../lib/core/device';
import { native } from '../lib/native/addon';
import { OP_NAMES } from '../lib/native/ops.generated';
import type { Program } from '../lib/core/program';
import { randn32, rng } from './helpers';
import { opsCalledList } from './support/ops_called';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const gen = require('../scripts/gen_native_types.js') as { render(schema: unknown): string; target: string };

type Field = { name: string; kind: string; role?: string; dtype?: string; shape?: string; optional?: boolean; list?: boolean };
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
          expect(names.has(d) || d === 'or' || (f.list && d === 'i'), `${op.name}.${f.name} ${f.shape}: ${d}`).toBe(true);
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

describe('the ops a module declares (what Module.to checks)', () => {
  const images = (B: number, C: number, S: number) => Tensor.from(Float32Array.from(randn32(B * C * S * S, rng(3))), [B, C, S, S]);
  const tokens = (B: number, T: number, V: number) => Tensor.from(Int32Array.from({ length: B * T }, (_, i) => (i * 7 + 1) % V), [B, T]);
  // The ops the cases run outside the model: the losses (free functions) and the optimizer (which
  // declares its own, checked by its constructor).
  const outside = new Set(['crossEntropy', 'mse', 'adamwStep']);

  const cases: { name: string; model: () => Module; run: (m: Module) => void }[] = [
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
    it(`${c.name}: every op it runs is one its classes declare`, () => {
      const model = c.model();
      const declared = declaredOps(model.modules());
      const ran = opsCalled(() => c.run(model));
      const missed = [...ran].filter((op) => !declared.has(op) && !outside.has(op));
      expect(missed, `ops ${c.name} ran without declaring them (add them to the static ops of the class that runs them)`).toEqual([]);
      expect(ran.size).toBeGreaterThan(3);
    });

  it('declarations add up along the class chain and over the module tree', () => {
    const vit = new ViTClassifier({ imgSize: 8, patchSize: 4, dModel: 16, numHeads: 2, dFF: 24, depth: 1, numClasses: 3 });
    expect(declaredOps([vit])).toEqual(new Set([...ViTClassifier.ops, ...ViTEncoder.ops]));
    const ops = declaredOps(vit.modules());
    for (const op of ['attentionForward', 'attentionBackward', 'patchEmbedBackward', 'layernormForward', 'clsPosForward', 'gemm'])
      expect(ops.has(op), op).toBe(true);
    expect(ops.has('argmax')).toBe(false); // generation's: the Transformer's
    const t = new Transformer({ srcVocab: 5, tgtVocab: 5, maxLen: 6, dModel: 16, numHeads: 2, dFF: 24, depth: 1 });
    expect(declaredOps(t.modules()).has('argmax') && declaredOps(t.modules()).has('attentionDecode')).toBe(true);
  });

  it('optimizers declare their step, zeroGrad and gradient-clipping ops', () => {
    const p = new ViTClassifier({ imgSize: 4, patchSize: 4, inChannels: 1, dModel: 8, numHeads: 1, dFF: 8, depth: 1, numClasses: 2 }).parameters();
    const common = ['clipCoefficient', 'clipGradNorm', 'clipScale', 'copyRows', 'scale', 'sumSquares', 'zero'];
    expect([...declaredOps([new AdamW(p)])].sort()).toEqual(['adamwMultiStep', 'adamwStep', ...common].sort());
    expect([...declaredOps([new SGD(p, { momentum: 0.9 })])].sort()).toEqual(['sgdStep', ...common].sort());
  });

  it("a user's module class declares its ops in a static ops", () => {
    class Helper extends Module {
      static override readonly ops = ['fmaPeak'] as const;
      *forwardProgram(): Program<void> {}
      *backwardProgram(): Program<void> {}
    }
    expect([...declaredOps([new Helper()])]).toEqual(['fmaPeak']);
  });

  it('nothing in lib/ reads source text (Function.prototype.toString): what runs where is declared', () => {
    const files = (dir: string): string[] => fs.readdirSync(dir, { withFileTypes: true })
      .flatMap((e) => (e.isDirectory() ? files(path.join(dir, e.name)) : e.name.endsWith('.ts') ? [path.join(dir, e.name)] : []));
    const readers = files(path.join(__dirname, '..', 'lib')).filter((f) => /Function\.prototype\.toString|\.toString\.call\(/.test(fs.readFileSync(f, 'utf8')));
    expect(readers).toEqual([]);
  });
});
