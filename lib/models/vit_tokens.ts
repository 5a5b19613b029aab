/**
 * The start of a ViT encoder's token stream, timm's `_pos_embed`: patch tokens [B, N, D], an
 * optional class token and learned positions, in timm's two layouts:
 *   - pos_embed over every token (original ViT, DeiT): tokens = cat(cls, patches) + pos_embed [N+1];
 *   - noEmbedClass (DeiT III, big_vision) or no class token: tokens = cat(cls, patches + pos_embed [N]).
 * Under precision 'bf16' the first layout runs on bfloat16 patches and tokens (clsPos's bf16 kernel);
 * the second converts bfloat16 patches to float32 (the embedding op has no bf16 kernel), and the
 * blocks' first LayerNorm converts back.
 */
import { op, type Program } from '../core/program';
import { Scope } from '../core/scope';
import { Tensor } from '../core/tensor';
import type { Parameter } from '../core/module';

/** Where the positions go and whether a class token leads. */
export interface TokenLayout {
  classToken: boolean;
  noEmbedClass: boolean;
}

/** ids [B, N] with ids[b, n] = b·N + n: row (b, n) of patches [B·N, D] seen as an embedding table. */
function patchIds(B: number, N: number, device: Tensor['device']): Tensor<'int32'> {
  return Tensor.from(Int32Array.from({ length: B * N }, (_, i) => i), [B, N], device);
}

/** patches [B, N, D] += pos [N, D] in place: the embedding op with patches as its own table (exact: one add per value). */
function* addPositions(patches: Tensor<'float32'>, pos: Parameter, ids: Tensor<'int32'>): Program<void> {
  const [B, N, D] = patches.shape;
  yield* op('embeddingForward', { B, T: N, V: B * N, D, out: patches.storage, ids: ids.storage, table: patches.storage, pos: pos.storage });
}

/** The tokens [B, T, D] (T = N + 1 with a class token) from `patches` [B, N, D] (consumed). */
export function* startTokens(layout: TokenLayout, patches: Tensor<'float32'>, cls: Parameter | null, pos: Parameter): Program<Tensor<'float32'>> {
  const [B, N, D] = patches.shape;
  if (cls && !layout.noEmbedClass) {
    const h = Tensor.empty([B, N + 1, D], patches.dtype as 'float32', patches.device);
    yield* op('clsPosForward', { B, N, D, out: h.storage, cls: cls.storage, patches: patches.storage, pos: pos.storage });
    patches.recycle();
    return h;
  }
  if (patches.dtype !== 'float32') {
    const p32 = patches.cast('float32');
    patches.recycle();
    patches = p32;
  }
  const ids = patchIds(B, N, patches.device);
  try {
    yield* addPositions(patches, pos, ids);
  } finally {
    ids.dispose();
  }
  if (!cls) return patches;
  const T = N + 1, h = Tensor.empty([B, T, D], 'float32', patches.device);
  for (let b = 0; b < B; b++) yield* op('copyRows', { rows: 1, cols: D, dst: h.storage, dstStride: D, dstOffset: b * T * D, src: cls.storage, srcStride: D });
  yield* op('copyRows', { rows: B, cols: N * D, dst: h.storage, dstStride: T * D, dstOffset: D, src: patches.storage, srcStride: N * D });
  patches.recycle();
  return h;
}

/**
 * The backward of startTokens: d [B, T, D] → d(patches) [B, N, D]; accumulates cls.grad and
 * pos.grad. `d` stays the caller's.
 */
export function* startTokensBackward(layout: TokenLayout, d: Tensor<'float32'>, cls: Parameter | null, pos: Parameter): Program<Tensor<'float32'>> {
  const [B, T, D] = d.shape, N = cls ? T - 1 : T, dev = d.device;
  const tmp = new Scope();
  try {
    // The embedding op's backward gives pos.grad += Σ_b dout[b] and scatters dout into its table
    // gradient row by row: without a class token that table is d(patches) itself (zeroed first).
    let dpatches: Tensor<'float32'>, dout: Tensor<'float32'>, dtable: Tensor<'float32'>;
    if (cls && !layout.noEmbedClass) {
      dpatches = Tensor.empty([B, N, D], d.dtype as 'float32', dev);
      yield* op('clsPosBackward', { B, N, D, dcls: cls.gradData(), dpatches: dpatches.storage, dpos: pos.gradData(), dout: d.storage });
      return dpatches;
    }
    if (d.dtype !== 'float32') d = tmp.add(d.cast('float32'));
    if (cls) {
      dpatches = Tensor.empty([B, N, D], 'float32', dev);
      const dpos = tmp.add(Tensor.zeros([N + 1, D], 'float32', dev)).storage;
      yield* op('clsPosBackward', { B, N, D, dcls: cls.gradData(), dpatches: dpatches.storage, dpos, dout: d.storage });
      dout = dpatches;
      dtable = tmp.add(Tensor.zeros([B * N, D], 'float32', dev));
    } else {
      dpatches = dtable = Tensor.zeros([B, N, D], 'float32', dev);
      dout = d;
    }
    const ids = tmp.add(patchIds(B, N, dev));
    yield* op('embeddingBackward', { B, T: N, V: B * N, D, dtable: dtable.storage, dpos: pos.gradData(), dout: dout.storage, ids: ids.storage });
    return dpatches;
  } finally {
    tmp.close();
  }
}
