/**
 * Attention whose heads' total width numHeads·headDim is not the model's D (timm's attn_head_dim,
 * the seeds' d_k = d_v): the attention ops take one width for the input, the heads and the output,
 * so the layer runs them at a width W = H·Dp on zero-padded copies, with each head padded from Dh
 * to Dp = max(Dh, ⌈D/H⌉) columns and the scores scaled by 1/√Dh (the ops' `scale`). x [.., D]
 * becomes [x | 0] [.., W]; qkv.weight [3·H·Dh, D] becomes [3W, W], head h's Dh rows of q, k and v
 * at rows h·Dp.. of their third, the other rows and the columns past D zero (qkv.bias alike);
 * proj.weight [D, H·Dh] becomes [W, W], head h's Dh columns at columns h·Dp.., the rest zero
 * (proj.bias gains zero entries). Every padded product adds exact zeros, so the values are those of
 * the narrow layer; the padded outputs' extra columns are zero and dropped, and backward folds the
 * padded gradients back.
 */
import { Parameter } from '../core/module';
import { op, type OpArgs, type Program } from '../core/program';
import { Scope } from '../core/scope';
import { Tensor } from '../core/tensor';
import type { Linear } from './linear';

/** How the heads are padded: D model width, H heads of width Dh padded to Dp, W = H·Dp ≥ D, scale = 1/√Dh. */
export interface HeadPadding {
  D: number;
  H: number;
  Dh: number;
  Dp: number;
  W: number;
  scale: number;
}

/** The padding of H heads of width Dh in a model of width D; null when H·Dh = D (the ops run the layer as it is). */
export function headPadding(D: number, H: number, Dh: number): HeadPadding | null {
  if (H * Dh === D) return null;
  const Dp = Math.max(Dh, Math.ceil(D / H));
  return { D, H, Dh, Dp, W: H * Dp, scale: 1 / Math.sqrt(Dh) };
}

/** The padded weights (the ops' qkvWeight, qkvBias, projWeight, projBias at width W). */
export interface PaddedWeights {
  qkvWeight: Tensor<'float32'>;
  qkvBias: Tensor<'float32'> | null;
  projWeight: Tensor<'float32'>;
  projBias: Tensor<'float32'> | null;
}

/** The padded copies of one forward (kept for its backward). */
export interface PaddedAttention extends PaddedWeights {
  g: HeadPadding;
  x: Tensor<'float32'>;
  memory: Tensor<'float32'> | null;
}

/** The first `cols` columns of `rows` rows of `src` (row width srcCols) into rows of width dstCols of `dst`. */
function* copyCols(dst: Tensor<'float32'>, dstCols: number, src: Tensor<'float32'>, srcCols: number, cols: number, rows: number): Program<void> {
  yield* op('copyRows', { rows, cols, dst: dst.storage, dstStride: dstCols, src: src.storage, srcStride: srcCols });
}

/** t viewed as `rows` rows of t.size / rows elements → zeros `shape` (rows rows of width w) holding them at the start of each row. */
function* padRows(t: Tensor<'float32'>, rows: number, w: number, shape: number[]): Program<Tensor<'float32'>> {
  const out = Tensor.zeros(shape, 'float32', t.device);
  yield* copyCols(out, w, t, t.size / rows, t.size / rows, rows);
  return out;
}

/** t [..., w] → zeros [..., I] holding t in its first w columns. */
export function* padCols(t: Tensor<'float32'>, I: number): Program<Tensor<'float32'>> {
  const w = t.shape[t.shape.length - 1];
  return yield* padRows(t, t.size / w, I, [...t.shape.slice(0, -1), I]);
}

/** t [..., I] → its first D columns [..., D] (t itself when I = D; otherwise t is freed). */
export function* narrowRows(t: Tensor<'float32'>, D: number): Program<Tensor<'float32'>> {
  const I = t.shape[t.shape.length - 1];
  if (I === D) return t;
  const out = Tensor.empty([...t.shape.slice(0, -1), D], 'float32', t.device);
  yield* copyCols(out, D, t, I, D, t.size / I);
  t.dispose();
  return out;
}

/** The weights of qkv and proj padded by g; their tensors belong to `scope`. */
export function* padWeights(scope: Scope, g: HeadPadding, qkv: Linear, proj: Linear): Program<PaddedWeights> {
  const { D, H, Dp, W } = g;
  const wide = scope.add(yield* padCols(qkv.weight, W));  // [3·H·Dh, W]
  return {
    qkvWeight: scope.add(yield* padRows(wide, 3 * H, Dp * W, [3 * W, W])),
    qkvBias: qkv.bias ? scope.add(yield* padRows(qkv.bias, 3 * H, Dp, [3 * W])) : null,
    projWeight: scope.add(yield* padRows(proj.weight, D * H, Dp, [W, W])),
    projBias: proj.bias ? scope.add(yield* padCols(proj.bias, W)) : null,
  };
}

/** The padded input and weights of a forward; their tensors belong to `scope`. */
export function* padAttention(scope: Scope, g: HeadPadding, a: { x: Tensor<'float32'>; memory: Tensor<'float32'> | null; qkv: Linear; proj: Linear }):
Program<PaddedAttention> {
  return {
    g, ...(yield* padWeights(scope, g, a.qkv, a.proj)),
    x: scope.add(yield* padCols(a.x, g.W)),
    memory: a.memory ? scope.add(yield* padCols(a.memory, g.W)) : null,
  };
}

/** p.grad += the first `cols` columns of each of the `rows` rows of `wide` (row width w). */
function* foldInto(p: Parameter, wide: Tensor<'float32'>, w: number, rows: number, cols: number): Program<void> {
  const narrow = Tensor.empty([rows, cols], 'float32', wide.device);
  try {
    yield* copyCols(narrow, cols, wide, w, cols, rows);
    yield* op('accumulate', { n: p.size, y: p.gradData(), x: narrow.storage });
  } finally {
    narrow.dispose();
  }
}

type BackwardArgs = Omit<OpArgs<'attentionBackward'>, 'dx' | 'dMemory' | 'dQkvWeight' | 'dQkvBias' | 'dProjWeight' | 'dProjBias' | 'dout' |
  'x' | 'memory' | 'qkvWeight' | 'projWeight'>;

/** The backward of a padded forward: dy [B, Tq, D] → dx (and dMemory); accumulates the parameter gradients of qkv and proj. */
export function* paddedBackward(p: PaddedAttention, args: BackwardArgs, dy: Tensor<'float32'>, qkv: Linear, proj: Linear):
Program<Tensor<'float32'> | { dx: Tensor<'float32'>; dMemory: Tensor<'float32'> }> {
  const { D, H, Dh, Dp, W } = p.g, dev = dy.device, tmp = new Scope();
  try {
    const dout = tmp.add(yield* padCols(dy, W));
    const dx = Tensor.empty(p.x.shape, 'float32', dev);
    const dMemory = p.memory ? Tensor.empty(p.memory.shape, 'float32', dev) : null;
    const dQkvWeight = tmp.add(Tensor.zeros([3 * W, W], 'float32', dev));
    const dQkvBias = qkv.bias ? tmp.add(Tensor.zeros([3 * W], 'float32', dev)) : null;
    const dProjWeight = tmp.add(Tensor.zeros([W, W], 'float32', dev));
    const dProjBias = proj.bias ? tmp.add(Tensor.zeros([W], 'float32', dev)) : null;
    yield* op('attentionBackward', { ...args, dx: dx.storage, dMemory: dMemory?.storage ?? null, dQkvWeight: dQkvWeight.storage,
      dQkvBias: dQkvBias?.storage ?? null, dProjWeight: dProjWeight.storage, dProjBias: dProjBias?.storage ?? null,
      dout: dout.storage, x: p.x.storage, memory: p.memory?.storage ?? null, qkvWeight: p.qkvWeight.storage, projWeight: p.projWeight.storage });
    // qkv: the heads' Dh rows of each Dp (as rows of width W), then their first D columns.
    const heads = tmp.add(Tensor.empty([3 * H * Dh, W], 'float32', dev));
    yield* copyCols(heads, Dh * W, dQkvWeight, Dp * W, Dh * W, 3 * H);
    yield* foldInto(qkv.weight, heads, W, 3 * H * Dh, D);
    if (qkv.bias && dQkvBias) yield* foldInto(qkv.bias, dQkvBias, Dp, 3 * H, Dh);
    yield* foldInto(proj.weight, dProjWeight, Dp, D * H, Dh);
    if (proj.bias && dProjBias) yield* foldInto(proj.bias, dProjBias, W, 1, D);
    const x = yield* narrowRows(dx, D);
    if (!dMemory) return x;
    return { dx: x, dMemory: yield* narrowRows(dMemory, D) };
  } finally {
    tmp.close();
  }
}
