/**
 * Bad input to the package's public functions and modules (lib/index.ts): configs with missing,
 * zero, negative, fractional, NaN, infinite or string fields; inputs that are not tensors, of the
 * wrong dtype, rank or dims, or disposed; images whose size is not a multiple of the patch; masks
 * of the wrong shape or dtype; token ids and targets out of range; backward before forward;
 * modules used after dispose(); mismatched state dicts (after which every weight must be as it
 * was); bad optimizer, schedule, loss and conversion arguments; and NaN/Inf tensors under
 * checkFinite mode, which must name the first non-finite tensor.
 */
import { expect } from 'vitest';

import {
  AdamW, clipGradNorm, cosineWithWarmup, crossEntropy, Decoder, DecoderBlock, Encoder, EncoderBlock, FeedForward,
  fromTorchTransformer, inverseSqrtWarmup, LayerNorm, Linear, mse, MultiHeadAttention, paddingMask, Parameter,
  PatchEmbedding, patchify, setCheckFinite, SGD, Tensor, Transformer, unpatchify, ViTClassifier, ViTDecoder, ViTEncoder,
  type Module,
} from '../../lib';
import { Catalogue } from './case';

const fl = (shape: number[]) => Tensor.zeros(shape);
const ints = (shape: number[], fill = 1) => Tensor.from(new Int32Array(shape.reduce((a, b) => a * b, 1)).fill(fill), shape);
const bools = (shape: number[]) => Tensor.zeros(shape, 'bool');
const disposed = (t: Tensor) => (t.dispose(), t);
const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
/** The message of invalidArg for `name`: "Expected ... for <name> but received ...". */
const arg = (name: string) => new RegExp(`for ${esc(name)} but received`);
const filled = (shape: number[], at: number, v: number) => {
  const t = fl(shape);
  t.data[at] = v;
  return t;
};
/** Runs fn with checkFinite mode on. */
const finite = (fn: () => unknown) => () => {
  setCheckFinite(true);
  try {
    return fn();
  } finally {
    setCheckFinite(false);
  }
};

const D = 8, H = 2, F = 16;
const vitCfg = { imgSize: 8, patchSize: 4, inChannels: 1, dModel: D, numHeads: H, dFF: F, depth: 1 };
const seqCfg = { dModel: D, numHeads: H, dFF: F, depth: 1 };

/** What every module shares: its constructor, a valid forward call, and a gradient of the output's shape. */
interface ModuleSpec {
  name: string;
  make: () => Module;
  /** Config fields that must be positive integers. */
  ints: string[];
  /** The first forward argument's name and a valid value; `call` runs forward with it. */
  input: string;
  valid: () => Tensor;
  call: (m: Module, x: Tensor) => unknown;
  /** Inputs of the wrong rank, dims or dtype. */
  wrong: [string, () => Tensor][];
  /** A valid gradient of the output (absent: no backward to check). */
  dy?: () => Tensor;
}

type Fwd = { forward: (...a: unknown[]) => unknown; backward: (...a: unknown[]) => unknown };
const fwd = (m: Module) => m as unknown as Fwd;

const specs: ModuleSpec[] = [
  {
    name: 'Linear', make: () => new Linear({ inFeatures: D, outFeatures: 4 }), ints: ['inFeatures', 'outFeatures'],
    input: 'x', valid: () => fl([2, D]), call: (m, x) => fwd(m).forward(x), dy: () => fl([2, 4]),
    wrong: [['last dim 7', () => fl([2, 7])], ['rank 0', () => fl([])], ['int32', () => ints([2, D])]],
  },
  {
    name: 'LayerNorm', make: () => new LayerNorm({ dModel: D }), ints: ['dModel'],
    input: 'x', valid: () => fl([2, 3, D]), call: (m, x) => fwd(m).forward(x), dy: () => fl([2, 3, D]),
    wrong: [['last dim 9', () => fl([2, 9])], ['bool', () => bools([2, D])]],
  },
  {
    name: 'MultiHeadAttention', make: () => new MultiHeadAttention({ dModel: D, numHeads: H }), ints: ['dModel', 'numHeads'],
    input: 'x', valid: () => fl([2, 3, D]), call: (m, x) => fwd(m).forward(x), dy: () => fl([2, 3, D]),
    wrong: [['rank 2', () => fl([3, D])], ['rank 4', () => fl([1, 2, 3, D])], ['last dim 4', () => fl([2, 3, 4])], ['int32', () => ints([2, 3, D])]],
  },
  {
    name: 'FeedForward', make: () => new FeedForward({ dModel: D, dFF: F }), ints: ['dModel', 'dFF'],
    input: 'x', valid: () => fl([2, D]), call: (m, x) => fwd(m).forward(x), dy: () => fl([2, D]),
    wrong: [['last dim 16', () => fl([2, F])], ['int32', () => ints([2, D])]],
  },
  {
    name: 'PatchEmbedding', make: () => new PatchEmbedding({ imgSize: 8, patchSize: 4, inChannels: 1, dModel: D }),
    ints: ['imgSize', 'patchSize', 'inChannels', 'dModel'],
    input: 'images', valid: () => fl([1, 1, 8, 8]), call: (m, x) => fwd(m).forward(x), dy: () => fl([1, 4, D]),
    wrong: [['6x6 images (not a multiple of the patch)', () => fl([1, 1, 6, 6])], ['8x6 images', () => fl([1, 1, 8, 6])],
      ['2 channels', () => fl([1, 2, 8, 8])], ['rank 3', () => fl([1, 8, 8])], ['int32', () => ints([1, 1, 8, 8])]],
  },
  {
    name: 'EncoderBlock', make: () => new EncoderBlock({ dModel: D, numHeads: H, dFF: F }), ints: ['dModel', 'numHeads', 'dFF'],
    input: 'x', valid: () => fl([2, 3, D]), call: (m, x) => fwd(m).forward(x), dy: () => fl([2, 3, D]),
    wrong: [['rank 2', () => fl([3, D])], ['last dim 4', () => fl([2, 3, 4])]],
  },
  {
    name: 'DecoderBlock', make: () => new DecoderBlock({ dModel: D, numHeads: H, dFF: F }), ints: ['dModel', 'numHeads', 'dFF'],
    input: 'x', valid: () => fl([2, 3, D]), call: (m, x) => fwd(m).forward(x, fl([2, 5, D])), dy: () => fl([2, 3, D]),
    wrong: [['rank 2', () => fl([3, D])], ['last dim 4', () => fl([2, 3, 4])]],
  },
  {
    name: 'ViTEncoder', make: () => new ViTEncoder(vitCfg), ints: ['imgSize', 'patchSize', 'inChannels', 'dModel', 'numHeads', 'dFF', 'depth'],
    input: 'images', valid: () => fl([2, 1, 8, 8]), call: (m, x) => fwd(m).forward(x), dy: () => fl([2, 5, D]),
    wrong: [['6x6 images', () => fl([2, 1, 6, 6])], ['12x12 images', () => fl([2, 1, 12, 12])], ['rank 2', () => fl([2, 64])], ['int32', () => ints([2, 1, 8, 8])]],
  },
  {
    name: 'ViTClassifier', make: () => new ViTClassifier({ ...vitCfg, numClasses: 3 }), ints: ['imgSize', 'numClasses', 'depth'],
    input: 'images', valid: () => fl([2, 1, 8, 8]), call: (m, x) => fwd(m).forward(x), dy: () => fl([2, 3]),
    wrong: [['6x6 images', () => fl([2, 1, 6, 6])], ['3 channels', () => fl([2, 3, 8, 8])], ['bool', () => bools([2, 1, 8, 8])]],
  },
  {
    name: 'ViTDecoder', make: () => new ViTDecoder(vitCfg), ints: ['imgSize', 'patchSize', 'dModel', 'depth'],
    input: 'memory', valid: () => fl([2, 5, D]), call: (m, x) => fwd(m).forward(x), dy: () => fl([2, 4, 16]),
    wrong: [['last dim 4', () => fl([2, 5, 4])], ['rank 2', () => fl([5, D])]],
  },
  {
    name: 'Encoder', make: () => new Encoder({ ...seqCfg, vocabSize: 5, maxLen: 6 }), ints: ['vocabSize', 'maxLen', 'dModel'],
    input: 'tokens', valid: () => ints([2, 4]), call: (m, x) => fwd(m).forward(x), dy: () => fl([2, 4, D]),
    wrong: [['float32 tokens', () => fl([2, 4])], ['rank 1', () => ints([4])], ['T > maxLen', () => ints([2, 7])], ['T = 0', () => ints([2, 0])],
      ['an id = vocabSize', () => ints([2, 4], 5)], ['a negative id', () => ints([2, 4], -1)]],
  },
  {
    name: 'Decoder', make: () => new Decoder({ ...seqCfg, vocabSize: 5, maxLen: 6 }), ints: ['vocabSize', 'maxLen', 'numHeads'],
    input: 'tokens', valid: () => ints([2, 4]), call: (m, x) => fwd(m).forward(x, fl([2, 3, D])), dy: () => fl([2, 4, 5]),
    wrong: [['bool tokens', () => bools([2, 4])], ['T > maxLen', () => ints([2, 9])], ['an id past the vocabulary', () => ints([2, 4], 99)]],
  },
  {
    name: 'Transformer', make: () => new Transformer({ ...seqCfg, srcVocab: 5, tgtVocab: 6, maxLen: 6 }), ints: ['srcVocab', 'tgtVocab', 'maxLen'],
    input: 'src', valid: () => ints([2, 4]), call: (m, x) => fwd(m).forward(x, ints([2, 3])), dy: () => fl([2, 3, 6]),
    wrong: [['float32 src', () => fl([2, 4])], ['rank 3', () => ints([2, 4, 1])], ['an id past the vocabulary', () => ints([2, 4], 5)]],
  },
];

function moduleCases(c: Catalogue, s: ModuleSpec): void {
  const m = s.make();
  // Inputs that are not a valid tensor.
  c.add(`${s.name}.forward(${s.input} = Float32Array)`, 'ERR_NF_INVALID_ARG', arg(s.input), () => s.call(m, new Float32Array(4) as never));
  c.add(`${s.name}.forward(${s.input} = null)`, 'ERR_NF_INVALID_ARG', arg(s.input), () => s.call(m, null as never));
  c.add(`${s.name}.forward(${s.input} = undefined)`, 'ERR_NF_INVALID_ARG', arg(s.input), () => s.call(m, undefined as never));
  c.add(`${s.name}.forward(${s.input} disposed)`, 'ERR_NF_DISPOSED', new RegExp(`${s.input} is a disposed tensor`), () => s.call(m, disposed(s.valid())));
  for (const [what, t] of s.wrong) {
    const out = /id|vocab/.test(what) ? /token id|vocabulary/ : arg(s.input);
    c.add(`${s.name}.forward(${s.input}: ${what})`, 'ERR_NF_INVALID_ARG', new RegExp(`${out.source}|${arg(s.input).source}`), () => s.call(m, t()));
  }
  // Backward before any forward, and with a gradient of the wrong shape or dtype.
  if (s.dy) {
    c.add(`${s.name}.backward before forward`, 'ERR_NF_STATE', /backward called without a forward/, () => fwd(s.make()).backward(s.dy!()));
    const trained = s.make();
    s.call(trained, s.valid());
    c.add(`${s.name}.backward(dy: wrong shape)`, 'ERR_NF_INVALID_ARG', /for (dy|dLogits|dPatches) but received/, () => fwd(trained).backward(fl([1, 1, 3])));
    c.add(`${s.name}.backward(dy: int32)`, 'ERR_NF_INVALID_ARG', /for (dy|dLogits|dPatches) but received/, () => fwd(trained).backward(ints(s.dy!().shape as number[])));
    c.add(`${s.name}.backward(dy: disposed)`, 'ERR_NF_DISPOSED', /disposed tensor/, () => fwd(trained).backward(disposed(s.dy!())));
  }
  // Configs: each integer field zero, negative, fractional, NaN, infinite or a string; no config; a null config.
  const Ctor = s.make().constructor as new (c: unknown) => Module;
  const base = { ...(s.make() as unknown as { config: Record<string, unknown> }).config };
  for (const k of s.ints)
    for (const bad of [0, -1, 1.5, NaN, Infinity, '8'])
      c.add(`new ${s.name}({ ${k}: ${typeof bad === 'string' ? `'${bad}'` : bad} })`, 'ERR_NF_INVALID_ARG', arg(`config.${k}`),
        () => new Ctor({ ...base, [k]: bad }));
  if (!/^ViT/.test(s.name)) c.add(`new ${s.name}()`, 'ERR_NF_INVALID_ARG', /for config\./, () => new Ctor(undefined));
  c.add(`new ${s.name}(null)`, 'ERR_NF_INVALID_ARG', /for config/, () => new Ctor(null));
  c.add(`new ${s.name}('big')`, 'ERR_NF_INVALID_ARG', /for config/, () => new Ctor('big'));
  // A disposed module.
  const gone = s.make();
  gone.dispose();
  const path = esc(s.name);
  c.add(`${s.name}.forward after dispose()`, 'ERR_NF_DISPOSED', new RegExp(`${path}.forward called after dispose`), () => s.call(gone, s.valid()));
  if (s.dy) c.add(`${s.name}.backward after dispose()`, 'ERR_NF_DISPOSED', new RegExp(`${path}.backward called after dispose`), () => fwd(gone).backward(s.dy!()));
  c.add(`${s.name}.loadStateDict after dispose()`, 'ERR_NF_DISPOSED', new RegExp(`${path}.loadStateDict called after dispose`), () => gone.loadStateDict({}));
  // NaN and Inf under checkFinite: the input, then a parameter.
  c.add(`${s.name}.forward(${s.input} with NaN) under checkFinite`, s.valid().dtype === 'float32' ? 'ERR_NF_NOT_FINITE' : 'ERR_NF_INVALID_ARG',
    s.valid().dtype === 'float32' ? new RegExp(`argument 1 \\(input of ${path}.forward\\).*NaN at flat index 3`) : /.*/,
    finite(() => s.call(m, s.valid().dtype === 'float32' ? filled(s.valid().shape as number[], 3, NaN) : fl([1]))));
  const [pname, p] = s.make().namedParameters().at(-1)!;
  const poisoned = s.make();
  poisoned.stateDict()[pname].data[0] = Infinity;
  c.add(`${s.name}.forward with an Inf parameter under checkFinite`, 'ERR_NF_NOT_FINITE', new RegExp(`${esc(pname)}\\b.*Infinity`),
    finite(() => s.call(poisoned, s.valid())));
  if (s.dy) {
    const t = s.make();
    s.call(t, s.valid());
    const dy = s.dy();
    dy.data[dy.size - 1] = -Infinity;
    c.add(`${s.name}.backward(dy with -Inf) under checkFinite`, 'ERR_NF_NOT_FINITE', new RegExp(`input of ${path}.backward.*-Infinity`),
      finite(() => fwd(t).backward(dy)));
  }
  // State dicts: missing, unexpected, mis-shaped, wrong dtype, disposed or wrong-length entries leave every weight as it was.
  const target = s.make();
  const before = target.parameters().map((q) => q.toArray());
  const unchanged = () => target.parameters().forEach((q, i) => expect(Array.from(q.toArray())).toEqual(Array.from(before[i])));
  const good = () => Object.fromEntries(target.namedParameters().map(([n, q]) => [n, Tensor.from(new Float32Array(q.size).fill(7), q.shape)]));
  const sd = (label: string, code: string, names: RegExp, record: () => unknown, options?: unknown) =>
    c.add(`${s.name}.loadStateDict: ${label}`, code, names, () => target.loadStateDict(record() as never, options as never), unchanged);
  sd(`missing ${pname}`, 'ERR_NF_STATE_DICT', new RegExp(`missing ${esc(pname)}`), () => { const r = good(); delete r[pname]; return r; });
  sd('an unexpected key', 'ERR_NF_STATE_DICT', /unexpected extra\.weight/, () => ({ ...good(), 'extra.weight': fl([1]) }));
  sd(`${pname} mis-shaped`, 'ERR_NF_STATE_DICT', new RegExp(`${esc(pname)}: shape`), () => ({ ...good(), [pname]: fl([p.size + 1]) }));
  sd(`${pname} int32`, 'ERR_NF_STATE_DICT', new RegExp(`${esc(pname)}: expected a float32 Tensor`), () => ({ ...good(), [pname]: ints(p.shape as number[]) }));
  sd(`${pname} disposed`, 'ERR_NF_STATE_DICT', new RegExp(`${esc(pname)}: .*disposed`), () => ({ ...good(), [pname]: disposed(fl(p.shape as number[])) }));
  sd(`${pname} a short Float32Array`, 'ERR_NF_STATE_DICT', new RegExp(`${esc(pname)}: ${p.size - 1} values`), () => ({ ...good(), [pname]: new Float32Array(p.size - 1) }));
  sd(`${pname} a number`, 'ERR_NF_STATE_DICT', new RegExp(`${esc(pname)}: expected`), () => ({ ...good(), [pname]: 3 }));
  sd('record null', 'ERR_NF_INVALID_ARG', arg('record'), () => null);
  sd('strict = "yes"', 'ERR_NF_INVALID_ARG', arg('options.strict'), good, { strict: 'yes' });
}

/** Options objects and masks of the wrong shape, dtype or type. */
function optionCases(c: Catalogue): void {
  const mha = new MultiHeadAttention({ dModel: D, numHeads: H });
  const x = fl([2, 3, D]);
  const o = (label: string, names: RegExp, opts: unknown) =>
    c.add(`MultiHeadAttention.forward(x, ${label})`, 'ERR_NF_INVALID_ARG', names, () => mha.forward(x, opts as never));
  o('null options', arg('options'), null);
  o('keyPaddingMask [2, 4]', arg('options.keyPaddingMask'), { keyPaddingMask: bools([2, 4]) });
  o('keyPaddingMask float32', arg('options.keyPaddingMask'), { keyPaddingMask: fl([2, 3]) });
  o('keyPaddingMask a Uint8Array', arg('options.keyPaddingMask'), { keyPaddingMask: new Uint8Array(6) });
  o('attnMask [3, 4]', arg('options.attnMask'), { attnMask: bools([3, 4]) });
  o('attnMask [3]', arg('options.attnMask'), { attnMask: bools([3]) });
  o('attnMask [3, 3, 3] (batch 3 != 2)', arg('options.attnMask'), { attnMask: bools([3, 3, 3]) });
  o('attnMask int32', arg('options.attnMask'), { attnMask: ints([3, 3]) });
  o('memory with another width', arg('options.memory'), { memory: fl([2, 5, 4]) });
  o('memory with another batch', arg('options.memory'), { memory: fl([3, 5, D]) });
  o("causal 'yes'", arg('options.causal'), { causal: 'yes' });
  o('needWeights 1', arg('options.needWeights'), { needWeights: 1 });

  const enc = new EncoderBlock({ dModel: D, numHeads: H, dFF: F });
  c.add('EncoderBlock.forward(x, null)', 'ERR_NF_INVALID_ARG', arg('options'), () => enc.forward(x, null as never));
  c.add('EncoderBlock.forward(keyPaddingMask [2, 2])', 'ERR_NF_INVALID_ARG', arg('options.keyPaddingMask'), () => enc.forward(x, { keyPaddingMask: bools([2, 2]) }));
  const dec = new DecoderBlock({ dModel: D, numHeads: H, dFF: F });
  const mem = fl([2, 5, D]);
  c.add('DecoderBlock.forward(x, memory: another batch)', 'ERR_NF_INVALID_ARG', arg('memory'), () => dec.forward(x, fl([1, 5, D])));
  c.add('DecoderBlock.forward(x, null memory)', 'ERR_NF_INVALID_ARG', arg('memory'), () => dec.forward(x, null as never));
  c.add('DecoderBlock.forward(x, memory, null)', 'ERR_NF_INVALID_ARG', arg('options'), () => dec.forward(x, mem, null as never));
  c.add('DecoderBlock.forward(tgtKeyPaddingMask [2, 5])', 'ERR_NF_INVALID_ARG', arg('options.tgtKeyPaddingMask'), () => dec.forward(x, mem, { tgtKeyPaddingMask: bools([2, 5]) }));
  c.add('DecoderBlock.forward(memoryKeyPaddingMask [2, 3])', 'ERR_NF_INVALID_ARG', arg('options.memoryKeyPaddingMask'), () => dec.forward(x, mem, { memoryKeyPaddingMask: bools([2, 3]) }));
  c.add('DecoderBlock.forward(memoryKeyPaddingMask float32)', 'ERR_NF_INVALID_ARG', arg('options.memoryKeyPaddingMask'), () => dec.forward(x, mem, { memoryKeyPaddingMask: fl([2, 5]) }));

  const vdec = new ViTDecoder(vitCfg);
  c.add('ViTDecoder.forward(memoryKeyPaddingMask [2, 4])', 'ERR_NF_INVALID_ARG', arg('options.memoryKeyPaddingMask'), () => vdec.forward(mem, { memoryKeyPaddingMask: bools([2, 4]) }));
  c.add('ViTDecoder.forward(memory, null)', 'ERR_NF_INVALID_ARG', arg('options'), () => vdec.forward(mem, null as never));
  c.add('ViTDecoder.backward(dPatches, dTokens: wrong shape)', 'ERR_NF_INVALID_ARG', arg('dTokens'), () => {
    vdec.forward(mem); // a fresh forward: the failed ones above freed the previous one's activations
    return vdec.backward(fl([2, 4, 16]), fl([2, 4, 3]));
  });
  const vit = new ViTEncoder(vitCfg);
  c.add('ViTEncoder.attentionMaps(6x6 images)', 'ERR_NF_INVALID_ARG', arg('images'), () => vit.attentionMaps(fl([1, 1, 6, 6])));
  c.add('ViTEncoder.forward(images, null)', 'ERR_NF_INVALID_ARG', arg('options'), () => vit.forward(fl([1, 1, 8, 8]), null as never));

  const encoder = new Encoder({ ...seqCfg, vocabSize: 5, maxLen: 6 });
  c.add('Encoder.forward(keyPaddingMask [2, 5])', 'ERR_NF_INVALID_ARG', arg('options.keyPaddingMask'), () => encoder.forward(ints([2, 4]), { keyPaddingMask: bools([2, 5]) }));
  c.add('Encoder.forward(tokens, null)', 'ERR_NF_INVALID_ARG', arg('options'), () => encoder.forward(ints([2, 4]), null as never));
  const decoder = new Decoder({ ...seqCfg, vocabSize: 5, maxLen: 6 });
  c.add('Decoder.forward(memory: another width)', 'ERR_NF_INVALID_ARG', arg('memory'), () => decoder.forward(ints([2, 4]), fl([2, 3, 4])));
  c.add('Decoder.forward(memoryKeyPaddingMask [2, 4])', 'ERR_NF_INVALID_ARG', arg('options.memoryKeyPaddingMask'), () => decoder.forward(ints([2, 4]), fl([2, 3, D]), { memoryKeyPaddingMask: bools([2, 4]) }));
  c.add('Decoder.forward(tgtKeyPaddingMask [1, 4])', 'ERR_NF_INVALID_ARG', arg('options.tgtKeyPaddingMask'), () => decoder.forward(ints([2, 4]), fl([2, 3, D]), { tgtKeyPaddingMask: bools([1, 4]) }));
  c.add('Decoder.forward(tokens, memory, null)', 'ERR_NF_INVALID_ARG', arg('options'), () => decoder.forward(ints([2, 4]), fl([2, 3, D]), null as never));

  const tr = new Transformer({ ...seqCfg, srcVocab: 5, tgtVocab: 6, maxLen: 6 });
  c.add('Transformer.forward(src, tgt: another batch)', 'ERR_NF_INVALID_ARG', arg('tgt'), () => tr.forward(ints([2, 4]), ints([3, 4])));
  c.add('Transformer.forward(src, tgt: an id past tgtVocab)', 'ERR_NF_INVALID_ARG', /tgt.*token id|token id.*tgt/, () => tr.forward(ints([2, 4]), ints([2, 4], 6)));
  c.add('Transformer.forward(src, tgt: T > maxLen)', 'ERR_NF_INVALID_ARG', arg('tgt'), () => tr.forward(ints([2, 4]), ints([2, 7])));
  c.add('Transformer.generate(src: an id past srcVocab)', 'ERR_NF_INVALID_ARG', /src.*token id|token id.*src/, () => tr.generate(ints([1, 3], 7)));
  c.add('Transformer.generate(src, { maxLen: 0 })', 'ERR_NF_INVALID_ARG', arg('options.maxLen'), () => tr.generate(ints([1, 3]), { maxLen: 0 }));
  c.add('Transformer.generate(src, { maxLen: NaN })', 'ERR_NF_INVALID_ARG', arg('options.maxLen'), () => tr.generate(ints([1, 3]), { maxLen: NaN }));
  c.add('Transformer.generate(src, { bos: 6 })', 'ERR_NF_INVALID_ARG', arg('options.bos'), () => tr.generate(ints([1, 3]), { bos: 6 }));
  c.add('Transformer.generate(src, { eos: -1 })', 'ERR_NF_INVALID_ARG', arg('options.eos'), () => tr.generate(ints([1, 3]), { eos: -1 }));
  c.add("Transformer.generate(src, { useCache: 'no' })", 'ERR_NF_INVALID_ARG', arg('options.useCache'), () => tr.generate(ints([1, 3]), { useCache: 'no' as never }));
  c.add('Transformer.generate(src, null)', 'ERR_NF_INVALID_ARG', arg('options'), () => tr.generate(ints([1, 3]), null as never));
  c.add('new Transformer({ padIdx: 1.5 })', 'ERR_NF_INVALID_ARG', arg('config.padIdx'), () => new Transformer({ ...seqCfg, srcVocab: 5, tgtVocab: 6, maxLen: 6, padIdx: 1.5 }));
  c.add("new Transformer({ dropout: NaN })", 'ERR_NF_INVALID_ARG', arg('config.dropout'), () => new Transformer({ ...seqCfg, srcVocab: 5, tgtVocab: 6, maxLen: 6, dropout: NaN }));
  c.add("new Encoder({ positional: 'rotary' })", 'ERR_NF_INVALID_ARG', arg('config.positional'), () => new Encoder({ ...seqCfg, vocabSize: 5, maxLen: 6, positional: 'rotary' as never }));
  c.add('new LayerNorm({ eps: NaN })', 'ERR_NF_INVALID_ARG', arg('config.eps'), () => new LayerNorm({ dModel: D, eps: NaN }));
  c.add('new LayerNorm({ eps: -1e-5 })', 'ERR_NF_INVALID_ARG', arg('config.eps'), () => new LayerNorm({ dModel: D, eps: -1e-5 }));
  c.add('new MultiHeadAttention({ numHeads: 3 }) (does not divide dModel)', 'ERR_NF_INVALID_ARG', arg('config.numHeads'), () => new MultiHeadAttention({ dModel: D, numHeads: 3 }));
  c.add('new MultiHeadAttention({ dropout: 1 })', 'ERR_NF_INVALID_ARG', arg('config.dropout'), () => new MultiHeadAttention({ dModel: D, numHeads: H, dropout: 1 }));
  c.add("new FeedForward({ activation: 'swish' })", 'ERR_NF_INVALID_ARG', arg('config.activation'), () => new FeedForward({ dModel: D, dFF: F, activation: 'swish' as never }));
  c.add('new Linear({ seed: -1 })', 'ERR_NF_INVALID_ARG', arg('seed'), () => new Linear({ inFeatures: 2, outFeatures: 2, seed: -1 }));
  c.add("new Linear({ bias: 'no' })", 'ERR_NF_INVALID_ARG', arg('config.bias'), () => new Linear({ inFeatures: 2, outFeatures: 2, bias: 'no' as never }));
  c.add('new PatchEmbedding({ imgSize: 10, patchSize: 4 })', 'ERR_NF_INVALID_ARG', arg('config.patchSize'), () => new PatchEmbedding({ imgSize: 10, patchSize: 4, inChannels: 1, dModel: D }));
  c.add('new ViTClassifier({ imgSize: 10, patchSize: 4 })', 'ERR_NF_INVALID_ARG', arg('config.patchSize'), () => new ViTClassifier({ ...vitCfg, imgSize: 10 }));
  c.add('new EncoderBlock({ normFirst: 1 })', 'ERR_NF_INVALID_ARG', arg('config.normFirst'), () => new EncoderBlock({ dModel: D, numHeads: H, dFF: F, normFirst: 1 as never }));

  // One parameter disposed by hand: forward names it, and loading a state dict changes nothing.
  const half = new Linear({ inFeatures: 2, outFeatures: 2 });
  half.weight.dispose();
  const bias = half.bias!.toArray();
  c.add('Linear.forward with its weight disposed', 'ERR_NF_DISPOSED', /parameter Linear\.weight has been disposed/, () => half.forward(fl([1, 2])));
  c.add('Linear.loadStateDict with its weight disposed', 'ERR_NF_STATE_DICT', /weight: the parameter has been disposed/,
    () => half.loadStateDict({ weight: fl([2, 2]), bias: fl([2]) }), () => expect(Array.from(half.bias!.toArray())).toEqual(Array.from(bias)));

  // checkFinite names a non-finite output produced from finite inputs.
  const ln = new LayerNorm({ dModel: 4 });
  c.add('LayerNorm.forward overflowing to a non-finite output under checkFinite', 'ERR_NF_NOT_FINITE', /the output of LayerNorm\.forward/,
    finite(() => ln.forward(Tensor.from(Float32Array.of(3e38, 3e38, -3e38, 3e38), [1, 4]))));
  const vitNaN = new ViTClassifier({ ...vitCfg, numClasses: 3 });
  vitNaN.blocks[0].mlp.fc1.weight.data[5] = NaN;
  c.add('ViTClassifier with a NaN weight deep inside under checkFinite', 'ERR_NF_NOT_FINITE', /parameter ViTClassifier\.blocks\.0\.mlp\.fc1\.weight .*NaN at flat index 5/,
    finite(() => vitNaN.forward(fl([1, 1, 8, 8]))));
  c.add('setCheckFinite(1)', 'ERR_NF_INVALID_ARG', arg('on'), () => setCheckFinite(1 as never));
}

/** Tensors, losses, optimizers, schedules, conversion and the patch helpers. */
function functionCases(c: Catalogue): void {
  c.add('Tensor.from(an Array)', 'ERR_NF_INVALID_ARG', arg('data'), () => Tensor.from([1, 2] as never, [2]));
  c.add('Tensor.from(a Float64Array)', 'ERR_NF_INVALID_ARG', arg('data'), () => Tensor.from(new Float64Array(2) as never, [2]));
  c.add('Tensor.from(3 values, [2, 2])', 'ERR_NF_INVALID_ARG', arg('data'), () => Tensor.from(new Float32Array(3), [2, 2]));
  c.add("Tensor.from(data, '2')", 'ERR_NF_INVALID_ARG', arg('shape'), () => Tensor.from(new Float32Array(2), '2' as never));
  c.add('Tensor.from(data, [2, NaN])', 'ERR_NF_INVALID_ARG', arg('shape'), () => Tensor.from(new Float32Array(2), [2, NaN]));
  c.add('Tensor.from(data, [-2, -1])', 'ERR_NF_INVALID_ARG', arg('shape'), () => Tensor.from(new Float32Array(2), [-2, -1]));
  c.add('Tensor.zeros([2^30, 2^30])', 'ERR_NF_INVALID_ARG', arg('shape'), () => Tensor.zeros([2 ** 30, 2 ** 30]));
  c.add('Tensor.zeros([Infinity])', 'ERR_NF_INVALID_ARG', arg('shape'), () => Tensor.zeros([Infinity]));
  c.add("Tensor.zeros([2], 'float64')", 'ERR_NF_INVALID_ARG', arg('dtype'), () => Tensor.zeros([2], 'float64' as never));
  c.add("Tensor.zeros([2], 'toString')", 'ERR_NF_INVALID_ARG', arg('dtype'), () => Tensor.zeros([2], 'toString' as never));
  c.add('tensor.reshape([5]) of 4 elements', 'ERR_NF_INVALID_ARG', arg('shape'), () => fl([2, 2]).reshape([5]));
  c.add('disposed tensor.data', 'ERR_NF_DISPOSED', /disposed/, () => disposed(fl([2])).data);
  c.add('disposed tensor.toArray()', 'ERR_NF_DISPOSED', /disposed/, () => disposed(fl([2])).toArray());
  c.add('disposed tensor.reshape()', 'ERR_NF_DISPOSED', /disposed/, () => disposed(fl([2])).reshape([2]));
  c.add('Parameter.create([2], 3 values)', 'ERR_NF_INVALID_ARG', arg('values'), () => Parameter.create([2], new Float32Array(3)));

  const logits = fl([2, 3]), targets = Tensor.from(Int32Array.of(0, 2), [2]);
  c.add('crossEntropy(null, targets)', 'ERR_NF_INVALID_ARG', arg('logits'), () => crossEntropy(null as never, targets));
  c.add('crossEntropy(int32 logits)', 'ERR_NF_INVALID_ARG', arg('logits'), () => crossEntropy(ints([2, 3]), targets));
  c.add('crossEntropy(logits [2, 0])', 'ERR_NF_INVALID_ARG', arg('logits'), () => crossEntropy(fl([2, 0]), ints([2])));
  c.add('crossEntropy(scalar logits)', 'ERR_NF_INVALID_ARG', arg('logits'), () => crossEntropy(fl([]), ints([])));
  c.add('crossEntropy(targets [3])', 'ERR_NF_INVALID_ARG', arg('targets'), () => crossEntropy(logits, ints([3])));
  c.add('crossEntropy(float32 targets)', 'ERR_NF_INVALID_ARG', arg('targets'), () => crossEntropy(logits, fl([2])));
  c.add('crossEntropy(a target = V)', 'ERR_NF_INVALID_ARG', /target 3 at row 1/, () => crossEntropy(logits, Tensor.from(Int32Array.of(0, 3), [2])));
  c.add('crossEntropy(a target of -5)', 'ERR_NF_INVALID_ARG', /target -5 at row 0/, () => crossEntropy(logits, Tensor.from(Int32Array.of(-5, 0), [2])));
  c.add('crossEntropy(disposed logits)', 'ERR_NF_DISPOSED', /logits is a disposed tensor/, () => crossEntropy(disposed(fl([2, 3])), targets));
  c.add('crossEntropy({ labelSmoothing: NaN })', 'ERR_NF_INVALID_ARG', arg('options.labelSmoothing'), () => crossEntropy(logits, targets, { labelSmoothing: NaN }));
  c.add('crossEntropy({ labelSmoothing: 2 })', 'ERR_NF_INVALID_ARG', arg('options.labelSmoothing'), () => crossEntropy(logits, targets, { labelSmoothing: 2 }));
  c.add('crossEntropy({ ignoreIndex: 0.5 })', 'ERR_NF_INVALID_ARG', arg('options.ignoreIndex'), () => crossEntropy(logits, targets, { ignoreIndex: 0.5 }));
  c.add('crossEntropy(logits, targets, null)', 'ERR_NF_INVALID_ARG', arg('options'), () => crossEntropy(logits, targets, null as never));
  c.add('mse(pred, target of another shape)', 'ERR_NF_INVALID_ARG', arg('target'), () => mse(fl([2, 3]), fl([3, 2])));
  c.add('mse(pred, int32 target)', 'ERR_NF_INVALID_ARG', arg('target'), () => mse(fl([2, 3]), ints([2, 3])));
  c.add('mse(mask [3])', 'ERR_NF_INVALID_ARG', arg('options.mask'), () => mse(fl([2, 3]), fl([2, 3]), { mask: bools([3]) }));
  c.add('mse(float32 mask)', 'ERR_NF_INVALID_ARG', arg('options.mask'), () => mse(fl([2, 3]), fl([2, 3]), { mask: fl([2]) }));
  c.add('mse(pred, target, null)', 'ERR_NF_INVALID_ARG', arg('options'), () => mse(fl([2, 3]), fl([2, 3]), null as never));
  c.add('mse(disposed pred)', 'ERR_NF_DISPOSED', /pred is a disposed tensor/, () => mse(disposed(fl([2])), fl([2])));

  const model = new Linear({ inFeatures: 3, outFeatures: 2 });
  const params = model.parameters();
  c.add('new AdamW([])', 'ERR_NF_INVALID_ARG', arg('params'), () => new AdamW([]));
  c.add('new AdamW([1, 2])', 'ERR_NF_INVALID_ARG', arg('params'), () => new AdamW([1, 2] as never));
  c.add('new AdamW(params, null)', 'ERR_NF_INVALID_ARG', arg('options'), () => new AdamW(params, null as never));
  for (const [k, v] of [['lr', NaN], ['lr', -1], ['lr', Infinity], ['eps', NaN], ['weightDecay', -0.1]] as const)
    c.add(`new AdamW({ ${k}: ${v} })`, 'ERR_NF_INVALID_ARG', arg(`options.${k}`), () => new AdamW(params, { [k]: v }));
  c.add('new AdamW({ betas: [1, 0.9] })', 'ERR_NF_INVALID_ARG', arg('options.betas[0]'), () => new AdamW(params, { betas: [1, 0.9] }));
  c.add("new AdamW({ betas: 'x' })", 'ERR_NF_INVALID_ARG', arg('options.betas'), () => new AdamW(params, { betas: 'x' as never }));
  c.add('new SGD({ momentum: -1 })', 'ERR_NF_INVALID_ARG', arg('options.momentum'), () => new SGD(params, { momentum: -1 }));
  c.add('new SGD({ dampening: 2 })', 'ERR_NF_INVALID_ARG', arg('options.dampening'), () => new SGD(params, { dampening: 2 }));
  c.add('new SGD({ nesterov: true }) without momentum', 'ERR_NF_INVALID_ARG', arg('options.nesterov'), () => new SGD(params, { nesterov: true }));
  c.add("new SGD({ nesterov: 'yes' })", 'ERR_NF_INVALID_ARG', arg('options.nesterov'), () => new SGD(params, { momentum: 0.9, nesterov: 'yes' as never }));
  c.add('new SGD(params, null)', 'ERR_NF_INVALID_ARG', arg('options'), () => new SGD(params, null as never));
  const opt = new AdamW(params);
  c.add('adamw.loadStateDict(null)', 'ERR_NF_INVALID_ARG', arg('state'), () => opt.loadStateDict(null as never));
  c.add('adamw.loadStateDict(a state for 1 parameter)', 'ERR_NF_INVALID_ARG', arg('state'), () => opt.loadStateDict({ options: {}, state: [{ step: 1, buffers: [] }] }));
  c.add('adamw.loadStateDict(buffers of the wrong size)', 'ERR_NF_INVALID_ARG', arg('state.state[1]'),
    () => opt.loadStateDict({ options: {}, state: [{ step: 0, buffers: [new Float32Array(6), new Float32Array(6)] }, { step: 0, buffers: [new Float32Array(3), new Float32Array(2)] }] }));
  c.add('adamw.loadStateDict(options.lr NaN)', 'ERR_NF_INVALID_ARG', arg('state.options.lr'),
    () => opt.loadStateDict({ ...opt.stateDict(), options: { lr: NaN } }));
  const goneModel = new Linear({ inFeatures: 3, outFeatures: 2 });
  const goneOpt = new SGD(goneModel.parameters());
  goneModel.dispose();
  c.add('optimizer.step() over a disposed model', 'ERR_NF_DISPOSED', /optimizer parameter 0 has been disposed/, () => goneOpt.step());
  c.add('clipGradNorm(params, NaN)', 'ERR_NF_INVALID_ARG', arg('maxNorm'), () => clipGradNorm(params, NaN));
  c.add('clipGradNorm(params, -1)', 'ERR_NF_INVALID_ARG', arg('maxNorm'), () => clipGradNorm(params, -1));
  c.add("clipGradNorm('all', 1)", 'ERR_NF_INVALID_ARG', arg('params'), () => clipGradNorm('all' as never, 1));

  c.add('cosineWithWarmup()', 'ERR_NF_INVALID_ARG', arg('lr'), () => cosineWithWarmup(undefined as never));
  c.add('cosineWithWarmup({ lr: NaN })', 'ERR_NF_INVALID_ARG', arg('lr'), () => cosineWithWarmup({ lr: NaN, warmupSteps: 1, totalSteps: 10 }));
  c.add('cosineWithWarmup({ warmupSteps > totalSteps })', 'ERR_NF_INVALID_ARG', arg('warmupSteps'), () => cosineWithWarmup({ lr: 1, warmupSteps: 11, totalSteps: 10 }));
  c.add('cosineWithWarmup({ totalSteps: Infinity })', 'ERR_NF_INVALID_ARG', arg('totalSteps'), () => cosineWithWarmup({ lr: 1, warmupSteps: 1, totalSteps: Infinity }));
  c.add('inverseSqrtWarmup(null)', 'ERR_NF_INVALID_ARG', arg('options'), () => inverseSqrtWarmup(null as never));
  c.add('inverseSqrtWarmup({ dModel: 0 })', 'ERR_NF_INVALID_ARG', arg('dModel'), () => inverseSqrtWarmup({ dModel: 0, warmupSteps: 1 }));
  c.add("inverseSqrtWarmup({ factor: '1' })", 'ERR_NF_INVALID_ARG', arg('factor'), () => inverseSqrtWarmup({ dModel: 8, warmupSteps: 1, factor: '1' as never }));
  c.add('schedule(NaN)', 'ERR_NF_INVALID_ARG', arg('step'), () => cosineWithWarmup({ lr: 1, warmupSteps: 1, totalSteps: 10 })(NaN));

  c.add('fromTorchTransformer(null)', 'ERR_NF_INVALID_ARG', arg('record'), () => fromTorchTransformer(null as never));
  c.add('fromTorchTransformer(colliding keys)', 'ERR_NF_INVALID_ARG', arg('record'),
    () => fromTorchTransformer({ 'layers.0.linear1.weight': fl([1]), 'blocks.0.mlp.fc1.weight': fl([1]) }));
  c.add('paddingMask(null, 0)', 'ERR_NF_INVALID_ARG', arg('tokens'), () => paddingMask(null as never, 0));
  c.add('paddingMask(float32 tokens, 0)', 'ERR_NF_INVALID_ARG', arg('tokens'), () => paddingMask(fl([2, 2]) as never, 0));
  c.add('paddingMask(tokens, 0.5)', 'ERR_NF_INVALID_ARG', arg('padIdx'), () => paddingMask(ints([2, 2]), 0.5));
  c.add('patchify(6x6 images, 4)', 'ERR_NF_INVALID_ARG', arg('images'), () => patchify(fl([1, 1, 6, 6]), 4));
  c.add('patchify(images, 0)', 'ERR_NF_INVALID_ARG', arg('patchSize'), () => patchify(fl([1, 1, 8, 8]), 0));
  c.add('patchify(rank 3 images, 4)', 'ERR_NF_INVALID_ARG', arg('images'), () => patchify(fl([1, 8, 8]), 4));
  c.add('unpatchify(patches, 6, 4, 1)', 'ERR_NF_INVALID_ARG', arg('patchSize'), () => unpatchify(fl([1, 4, 16]), 6, 4, 1));
  c.add('unpatchify(patches with 5 patches, 8, 4, 1)', 'ERR_NF_INVALID_ARG', arg('patches'), () => unpatchify(fl([1, 5, 16]), 8, 4, 1));
  c.add('unpatchify(patches, 8, 4, NaN)', 'ERR_NF_INVALID_ARG', arg('channels'), () => unpatchify(fl([1, 4, 16]), 8, 4, NaN));
}

export function facadeCases(): Catalogue {
  const c = new Catalogue('facade');
  for (const s of specs) moduleCases(c, s);
  optionCases(c);
  functionCases(c);
  return c;
}
