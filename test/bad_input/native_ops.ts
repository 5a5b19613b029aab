/**
 * Bad input to the raw addon (`native`): for every op, a small valid call is mutated one field at
 * a time — each integer dim made NaN, negative, fractional, a string or too large; each array made
 * the wrong type, the wrong length, missing, or a view of a released (detached) buffer — and the
 * Async twin is fed a wrong length. Then dims whose products overflow int64 (what Args::count
 * guards against) with empty arrays, which before that guard could match the wrapped length and
 * send a kernel off the end of its buffers.
 */
import { native } from '../../lib/native/addon';
import { Catalogue } from './case';

type Fields = Record<string, unknown>;
const f32 = (n: number) => new Float32Array(n);
const i32 = (n: number) => new Int32Array(n);

/** A small valid call of every op with its integer dims (the other numbers keep their valid values). */
const ops: { op: string; dims: string[]; args: () => Fields }[] = [
  { op: 'layernormForward', dims: ['rows', 'D'], args: () => ({ rows: 2, D: 4, out: f32(8), mean: f32(2), rstd: f32(2), x: f32(8), gamma: f32(4), beta: f32(4) }) },
  { op: 'layernormBackward', dims: ['rows', 'D'], args: () => ({ rows: 2, D: 4, dx: f32(8), dgamma: f32(4), dbeta: f32(4), dout: f32(8), x: f32(8), mean: f32(2), rstd: f32(2), gamma: f32(4) }) },
  { op: 'attentionForward', dims: ['B', 'Tq', 'D', 'H'], args: () => ({ B: 1, Tq: 2, D: 4, H: 2, out: f32(8), qkv: f32(24), ctx: f32(8), lse: f32(4), x: f32(8), qkvWeight: f32(48), projWeight: f32(16) }) },
  { op: 'attentionBackward', dims: ['B', 'Tq', 'D', 'H'], args: () => ({ B: 1, Tq: 2, D: 4, H: 2, dx: f32(8), dQkvWeight: f32(48), dProjWeight: f32(16), dout: f32(8), qkv: f32(24), ctx: f32(8), lse: f32(4), x: f32(8), qkvWeight: f32(48), projWeight: f32(16) }) },
  { op: 'attentionDecode', dims: ['B', 'D', 'H', 't', 'maxT'], args: () => ({ B: 1, D: 4, H: 2, t: 0, maxT: 2, cache: f32(16), out: f32(4), x: f32(4), qkvWeight: f32(48), projWeight: f32(16) }) },
  { op: 'feedforwardForward', dims: ['rows', 'D', 'F'], args: () => ({ rows: 2, D: 4, F: 8, y: f32(8), a: f32(16), x: f32(8), W1: f32(32), b1: f32(8), W2: f32(32), b2: f32(4) }) },
  { op: 'feedforwardBackward', dims: ['rows', 'D', 'F'], args: () => ({ rows: 2, D: 4, F: 8, dx: f32(8), dW1: f32(32), db1: f32(8), dW2: f32(32), db2: f32(4), dy: f32(8), x: f32(8), h: f32(16), a: f32(16), W1: f32(32), W2: f32(32) }) },
  { op: 'patchEmbedForward', dims: ['B', 'C', 'H', 'W', 'P', 'D'], args: () => ({ B: 1, C: 1, H: 4, W: 4, P: 2, D: 3, out: f32(12), images: f32(16), weight: f32(12), bias: f32(3) }) },
  { op: 'patchEmbedBackward', dims: ['B', 'C', 'H', 'W', 'P', 'D'], args: () => ({ B: 1, C: 1, H: 4, W: 4, P: 2, D: 3, dweight: f32(12), dbias: f32(3), dout: f32(12), images: f32(16), weight: f32(12) }) },
  { op: 'embeddingForward', dims: ['B', 'T', 'V', 'D'], args: () => ({ B: 1, T: 2, V: 4, D: 3, out: f32(6), ids: i32(2), table: f32(12) }) },
  { op: 'embeddingBackward', dims: ['B', 'T', 'V', 'D'], args: () => ({ B: 1, T: 2, V: 4, D: 3, dtable: f32(12), dout: f32(6), ids: i32(2) }) },
  { op: 'sinusoidalEncoding', dims: ['len', 'D'], args: () => ({ len: 2, D: 4, out: f32(8) }) },
  { op: 'clsPosForward', dims: ['B', 'N', 'D'], args: () => ({ B: 1, N: 2, D: 3, out: f32(9), cls: f32(3), patches: f32(6), pos: f32(9) }) },
  { op: 'clsPosBackward', dims: ['B', 'N', 'D'], args: () => ({ B: 1, N: 2, D: 3, dcls: f32(3), dpatches: f32(6), dpos: f32(9), dout: f32(9) }) },
  { op: 'tokenPosForward', dims: ['B', 'N', 'D'], args: () => ({ B: 1, N: 2, D: 3, out: f32(6), token: f32(3), pos: f32(6) }) },
  { op: 'tokenPosBackward', dims: ['B', 'N', 'D'], args: () => ({ B: 1, N: 2, D: 3, dtoken: f32(3), dpos: f32(6), dout: f32(6) }) },
  { op: 'add', dims: ['n'], args: () => ({ n: 3, out: f32(3), a: f32(3), b: f32(3) }) },
  { op: 'accumulate', dims: ['n'], args: () => ({ n: 3, y: f32(3), x: f32(3) }) },
  { op: 'dropoutForward', dims: ['n', 'seed', 'offset'], args: () => ({ n: 3, p: 0.5, seed: 1, offset: 0, out: f32(3), x: f32(3) }) },
  { op: 'dropoutBackward', dims: ['n', 'seed', 'offset'], args: () => ({ n: 3, p: 0.5, seed: 1, offset: 0, dx: f32(3), dout: f32(3) }) },
  { op: 'crossEntropy', dims: ['N', 'V'], args: () => ({ N: 2, V: 3, loss: f32(1), logits: f32(6), targets: i32(2) }) },
  { op: 'mse', dims: ['rows', 'cols'], args: () => ({ rows: 2, cols: 3, loss: f32(1), pred: f32(6), target: f32(6) }) },
  { op: 'adamwStep', dims: ['n', 'step'], args: () => ({ n: 3, step: 1, param: f32(3), grad: f32(3), expAvg: f32(3), expAvgSq: f32(3) }) },
  { op: 'sgdStep', dims: ['n', 'step'], args: () => ({ n: 3, step: 1, param: f32(3), grad: f32(3) }) },
  { op: 'sumSquares', dims: ['n'], args: () => ({ n: 3, out: f32(1), x: f32(3) }) },
  { op: 'zero', dims: ['n'], args: () => ({ n: 3, x: f32(3) }) },
  { op: 'softmax', dims: ['rows', 'cols'], args: () => ({ rows: 2, cols: 3, out: f32(6), x: f32(6) }) },
  { op: 'logSoftmax', dims: ['rows', 'cols'], args: () => ({ rows: 2, cols: 3, out: f32(6), x: f32(6) }) },
  { op: 'argmax', dims: ['rows', 'cols'], args: () => ({ rows: 2, cols: 3, out: i32(2), x: f32(6) }) },
  { op: 'topk', dims: ['rows', 'cols', 'k'], args: () => ({ rows: 2, cols: 3, k: 2, values: f32(4), indices: i32(4), x: f32(6) }) },
  { op: 'activationForward', dims: ['n'], args: () => ({ n: 3, act: 'tanh', y: f32(3), x: f32(3) }) },
  { op: 'activationBackward', dims: ['n'], args: () => ({ n: 3, act: 'tanh', dx: f32(3), dy: f32(3), x: f32(3) }) },
  { op: 'channelScaleForward', dims: ['rows', 'cols'], args: () => ({ rows: 2, cols: 3, y: f32(6), x: f32(6), gamma: f32(3) }) },
  { op: 'channelScaleBackward', dims: ['rows', 'cols'], args: () => ({ rows: 2, cols: 3, dgamma: f32(3), dy: f32(6), x: f32(6), gamma: f32(3) }) },
  { op: 'scale', dims: ['n'], args: () => ({ n: 3, x: f32(3), s: 2 }) },
  { op: 'clipGradNorm', dims: ['n'], args: () => ({ n: 3, grad: f32(3), maxNorm: 1, totalNorm: f32(1) }) },
  { op: 'firstNonFinite', dims: ['n'], args: () => ({ n: 3, x: f32(3), index: new Float64Array(1) }) },
  { op: 'gemm', dims: ['M', 'N', 'K'], args: () => ({ M: 2, N: 3, K: 4, C: f32(6), A: f32(8), B: f32(12) }) },
  { op: 'linearForward', dims: ['rows', 'inFeatures', 'outFeatures'], args: () => ({ rows: 2, inFeatures: 4, outFeatures: 3, y: f32(6), x: f32(8), W: f32(12) }) },
  { op: 'packWeights', dims: ['N', 'K'], args: () => ({ N: 3, K: 4, packed: f32(16 + 4 * 32), W: f32(12) }) },
  { op: 'linearBackward', dims: ['rows', 'inFeatures', 'outFeatures'], args: () => ({ rows: 2, inFeatures: 4, outFeatures: 3, dW: f32(12), dy: f32(6), x: f32(8), W: f32(12) }) },
];

/** Dims whose products overflow int64 with every array empty (so a wrapped length of 0 would match). */
const overflowing: { op: string; dims: Fields; arrays: Fields }[] = [
  { op: 'layernormForward', dims: { rows: 2 ** 40, D: 2 ** 24 }, arrays: { out: 0, mean: 0, rstd: 0, x: 0, gamma: 0, beta: 0 } },
  { op: 'layernormBackward', dims: { rows: 2 ** 40, D: 2 ** 24 }, arrays: { dx: 0, dgamma: 0, dbeta: 0, dout: 0, x: 0, mean: 0, rstd: 0, gamma: 0 } },
  { op: 'attentionForward', dims: { B: 2 ** 40, Tq: 2 ** 24, D: 1, H: 1 }, arrays: { out: 0, qkv: 0, ctx: 0, lse: 0, x: 0, qkvWeight: 3, projWeight: 1 } },
  { op: 'attentionBackward', dims: { B: 2 ** 40, Tq: 2 ** 24, D: 1, H: 1 }, arrays: { dx: 0, dQkvWeight: 3, dProjWeight: 1, dout: 0, qkv: 0, ctx: 0, lse: 0, x: 0, qkvWeight: 3, projWeight: 1 } },
  { op: 'attentionDecode', dims: { B: 2 ** 40, D: 2 ** 24, H: 1, t: 0, maxT: 2 ** 24 }, arrays: { cache: 0, out: 0, x: 0, qkvWeight: 0, projWeight: 0 } },
  { op: 'feedforwardForward', dims: { rows: 2 ** 40, D: 2 ** 20, F: 2 ** 20 }, arrays: { y: 0, a: 0, x: 0, W1: 0, b1: 0, W2: 0, b2: 0 } },
  { op: 'feedforwardBackward', dims: { rows: 2 ** 40, D: 2 ** 20, F: 2 ** 20 }, arrays: { dx: 0, dW1: 0, db1: 0, dW2: 0, db2: 0, dy: 0, x: 0, h: 0, a: 0, W1: 0, W2: 0 } },
  { op: 'patchEmbedForward', dims: { B: 2 ** 16, C: 2 ** 12, H: 2 ** 14, W: 2 ** 14, P: 1, D: 2 ** 16 }, arrays: { out: 0, images: 0, weight: 0, bias: 0 } },
  { op: 'patchEmbedBackward', dims: { B: 2 ** 16, C: 2 ** 12, H: 2 ** 14, W: 2 ** 14, P: 1, D: 2 ** 16 }, arrays: { dweight: 0, dbias: 0, dout: 0, images: 0, weight: 0 } },
  { op: 'embeddingForward', dims: { B: 2 ** 40, T: 2 ** 24, V: 4, D: 1 }, arrays: { out: 0, ids: 0, table: 4 } },
  { op: 'embeddingBackward', dims: { B: 2 ** 40, T: 2 ** 24, V: 4, D: 1 }, arrays: { dtable: 4, dout: 0, ids: 0 } },
  { op: 'sinusoidalEncoding', dims: { len: 2 ** 40, D: 2 ** 24 }, arrays: { out: 0 } },
  { op: 'clsPosForward', dims: { B: 2 ** 40, N: 2 ** 24 - 1, D: 1 }, arrays: { out: 0, cls: 1, patches: 0, pos: 0 } },
  { op: 'clsPosBackward', dims: { B: 2 ** 40, N: 2 ** 24 - 1, D: 1 }, arrays: { dcls: 1, dpatches: 0, dpos: 0, dout: 0 } },
  { op: 'tokenPosForward', dims: { B: 2 ** 40, N: 2 ** 24, D: 1 }, arrays: { out: 0, token: 1, pos: 0 } },
  { op: 'tokenPosBackward', dims: { B: 2 ** 40, N: 2 ** 24, D: 1 }, arrays: { dtoken: 1, dpos: 0, dout: 0 } },
  { op: 'crossEntropy', dims: { N: 2 ** 40, V: 2 ** 24 }, arrays: { loss: 1, logits: 0, targets: 0 } },
  { op: 'softmax', dims: { rows: 2 ** 40, cols: 2 ** 24 }, arrays: { out: 0, x: 0 } },
  { op: 'logSoftmax', dims: { rows: 2 ** 40, cols: 2 ** 24 }, arrays: { out: 0, x: 0 } },
  { op: 'topk', dims: { rows: 2 ** 40, cols: 2 ** 24, k: 2 ** 24 }, arrays: { values: 0, indices: 0, x: 0 } },
  { op: 'mse', dims: { rows: 2 ** 40, cols: 2 ** 24 }, arrays: { loss: 1, pred: 0, target: 0 } },
];

/** A wrong-typed stand-in of the same length: never the Float32Array/Float64Array/Int32Array/Uint8Array a field takes. */
function wrongType(v: ArrayBufferView & { length: number }): ArrayBufferView {
  return v instanceof Int32Array || v instanceof Float64Array ? new Float32Array(v.length) : new Int16Array(v.length);
}

/** A view of a buffer that was released: detached, length 0 (what a disposed tensor's storage becomes). */
function detached(like: Float32Array | Int32Array | Float64Array): ArrayBufferView {
  const buf = new ArrayBuffer(Math.max(1, like.length) * like.BYTES_PER_ELEMENT);
  const view = new (like.constructor as Float32ArrayConstructor)(buf);
  native.release(buf);
  return view;
}

type Op = (a: Fields) => unknown;
const call = (op: string, a: Fields) => (native as unknown as Record<string, Op>)[op](a);

export function nativeOpCases(): Catalogue {
  const c = new Catalogue('native');
  for (const { op, dims, args } of ops) {
    c.add(`${op}(no options)`, 'ERR_NF_INVALID_ARG', /options object/, () => (native as unknown as Record<string, () => unknown>)[op]());
    c.add(`${op}(null)`, 'ERR_NF_INVALID_ARG', /options object/, () => call(op, null as unknown as Fields));
    for (const d of dims)
      for (const bad of [NaN, -1, 1.5, '2', 2 ** 60])
        c.add(`${op} ${d} = ${typeof bad === 'string' ? `'${bad}'` : bad}`, 'ERR_NF_INVALID_ARG', new RegExp(`for ${d}\\b`),
          () => call(op, { ...args(), [d]: bad }));
    for (const [field, v] of Object.entries(args())) {
      if (!ArrayBuffer.isView(v)) continue;
      const arr = v as Float32Array;
      const named = new RegExp(`for ${field}\\b|${field} is detached|exactly one of ${field}\\b`);
      c.add(`${op} ${field} of the wrong type`, 'ERR_NF_INVALID_ARG', named, () => call(op, { ...args(), [field]: wrongType(arr) }));
      c.add(`${op} ${field} one element too long`, 'ERR_NF_INVALID_ARG', named,
        () => call(op, { ...args(), [field]: new (arr.constructor as Float32ArrayConstructor)(arr.length + 1) }));
      c.add(`${op} ${field} missing`, 'ERR_NF_INVALID_ARG', named, () => call(op, { ...args(), [field]: undefined }));
      c.add(`${op} ${field} detached (released)`, 'ERR_NF_INVALID_ARG', named, () => call(op, { ...args(), [field]: detached(arr) }));
    }
    const first = Object.entries(args()).find(([, v]) => ArrayBuffer.isView(v))!;
    const short = { ...args(), [first[0]]: new Float32Array(0) };
    c.add(`${op}Async with a wrong ${first[0]} rejects`, 'ERR_NF_INVALID_ARG', new RegExp(`for ${first[0]}\\b`), () => call(`${op}Async`, short));
  }
  for (const { op, dims, arrays } of overflowing) {
    const a: Fields = { ...dims };
    for (const [k, n] of Object.entries(arrays)) a[k] = k === 'ids' || k === 'targets' ? i32(n as number) : f32(n as number);
    c.add(`${op} with dims overflowing int64 (${Object.values(dims).join(', ')})`, 'ERR_NF_INVALID_ARG', /at most 2\^40 elements/, () => call(op, a));
    c.add(`${op}Async with dims overflowing int64`, 'ERR_NF_INVALID_ARG', /at most 2\^40 elements/, () => call(`${op}Async`, a));
  }
  c.add('alignedOffset(a Float32Array)', 'ERR_NF_INVALID_ARG', /buffer/,
    () => native.alignedOffset(new Float32Array(4) as unknown as ArrayBuffer));
  c.add('release(a number)', 'ERR_NF_INVALID_ARG', /buffer/, () => native.release(3 as unknown as ArrayBuffer));
  c.add("setIsa('sse9')", 'ERR_NF_INVALID_ARG', /isa/, () => native.setIsa('sse9' as 'scalar'));
  c.add('setNumThreads(-1)', 'ERR_NF_INVALID_ARG', /for n/, () => native.setNumThreads(-1));
  c.add('setNumThreads(1.5)', 'ERR_NF_INVALID_ARG', /for n/, () => native.setNumThreads(1.5));
  return c;
}
