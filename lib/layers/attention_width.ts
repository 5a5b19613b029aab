/**
 * Attention whose heads are wider in total than the model (numHeads·headDim = I > D, timm's
 * attn_head_dim): the attention ops take one width D for the input, the heads and the output, so
 * the layer runs them at width I on copies zero-padded to it. x [.., D] becomes [x | 0] [.., I];
 * qkv.weight [3I, D] gains zero columns ([3I, I]); proj.weight [D, I] and proj.bias [D] gain zero
 * rows. Every padded product adds exact zeros, so the values are those of the narrow layer; the
 * padded outputs' extra columns are zero and dropped, and backward folds the padded gradients back.
 */
import { Parameter } from '../module';
import { op, type OpArgs, type Program } from '../program';
import { Scope } from '../scope';
import { Tensor } from '../tensor';
import type { Linear } from './linear';

/** The padded copies of one forward (kept for its backward). */
export interface PaddedAttention {
  D: number;
  I: number;
  x: Tensor<'float32'>;
  memory: Tensor<'float32'> | null;
  qkvWeight: Tensor<'float32'>;
  projWeight: Tensor<'float32'>;
  projBias: Tensor<'float32'> | null;
}

/** The first `cols` columns of `rows` rows of `src` (row width srcCols) into rows of width dstCols of `dst`. */
function* copyCols(dst: Tensor<'float32'>, dstCols: number, src: Tensor<'float32'>, srcCols: number, cols: number, rows: number): Program<void> {
  yield* op('copyRows', { rows, cols, dst: dst.storage, dstStride: dstCols, src: src.storage, srcStride: srcCols });
}

/** t [..., w] → zeros [..., I] holding t in its first w columns. */
function* padCols(t: Tensor<'float32'>, I: number): Program<Tensor<'float32'>> {
  const w = t.shape[t.shape.length - 1];
  const out = Tensor.zeros([...t.shape.slice(0, -1), I], 'float32', t.device);
  yield* copyCols(out, I, t, w, w, t.size / w);
  return out;
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

/** The padded input and weights of a forward at width I; their tensors belong to `scope`. */
export function* padAttention(scope: Scope, a: { x: Tensor<'float32'>; memory: Tensor<'float32'> | null; qkv: Linear; proj: Linear; I: number }):
Program<PaddedAttention> {
  const { I } = a, D = a.x.shape[a.x.shape.length - 1];
  const projWeight = scope.add(Tensor.zeros([I, I], 'float32', a.x.device));
  yield* copyCols(projWeight, I, a.proj.weight, I, I, D);
  const projBias = a.proj.bias ? scope.add(yield* padCols(a.proj.bias, I)) : null;
  return {
    D, I, projWeight, projBias,
    x: scope.add(yield* padCols(a.x, I)),
    memory: a.memory ? scope.add(yield* padCols(a.memory, I)) : null,
    qkvWeight: scope.add(yield* padCols(a.qkv.weight, I)),
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
  const { D, I } = p, dev = dy.device, tmp = new Scope();
  try {
    const dout = tmp.add(yield* padCols(dy, I));
    const dx = Tensor.empty(p.x.shape, 'float32', dev);
    const dMemory = p.memory ? Tensor.empty(p.memory.shape, 'float32', dev) : null;
    const dQkvWeight = tmp.add(Tensor.zeros([3 * I, I], 'float32', dev));
    const dProjWeight = tmp.add(Tensor.zeros([I, I], 'float32', dev));
    const dProjBias = proj.bias ? tmp.add(Tensor.zeros([I], 'float32', dev)) : null;
    yield* op('attentionBackward', { ...args, dx: dx.storage, dMemory: dMemory?.storage ?? null, dQkvWeight: dQkvWeight.storage,
      dQkvBias: qkv.bias?.gradData() ?? null, dProjWeight: dProjWeight.storage, dProjBias: dProjBias?.storage ?? null,
      dout: dout.storage, x: p.x.storage, memory: p.memory?.storage ?? null, qkvWeight: p.qkvWeight.storage, projWeight: p.projWeight.storage });
    yield* foldInto(qkv.weight, dQkvWeight, I, 3 * I, D);
    yield* foldInto(proj.weight, dProjWeight, I, D, I);
    if (proj.bias && dProjBias) yield* foldInto(proj.bias, dProjBias, I, 1, D);
    const x = yield* narrowRows(dx, D);
    if (!dMemory) return x;
    return { dx: x, dMemory: yield* narrowRows(dMemory, D) };
  } finally {
    tmp.close();
  }
}
