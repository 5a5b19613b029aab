import type { FloatArray } from './layernorm';

/**
 * Token embeddings with positions, the sinusoidal position table, and the ViT token starts
 * (see native/cpu/embedding.h). Shapes are row-major; dims: B batch, T tokens, V vocabulary,
 * D width, N patches. Parameter gradients (dtable, dpos, dcls, dtoken) accumulate (+=);
 * dpatches is overwritten.
 */
export interface EmbeddingOps {
  /**
   * out[B*T, D] = table[ids] * scale + pos[t], as Encoder/Decoder's `embed(tokens) * scale +
   * positions[:T]`. ids: Int32Array [B, T], each in [0, V) (else an Error naming the first bad
   * position, before anything is written); table [V, D]; pos (optional) [maxLen, D] of which the
   * first T rows are used (a learned pos_embed or the sinusoidal table); maxLen defaults to T.
   * scale defaults to 1 (sqrt(D) with scale_embedding).
   */
  embeddingForward(a: {
    B: number; T: number; V: number; D: number; scale?: number; maxLen?: number;
    out: FloatArray; ids: Int32Array; table: FloatArray; pos?: FloatArray | null;
  }): void;
  /**
   * dtable[ids[b,t]] += scale * dout[b,t] (scatter-add); dpos[t] += Σ_b dout[b,t] for t < T
   * (optional: learned positions only). dtable [V, D], dpos [maxLen, D], dout [B*T, D].
   */
  embeddingBackward(a: {
    B: number; T: number; V: number; D: number; scale?: number; maxLen?: number;
    dtable: FloatArray; dpos?: FloatArray | null; dout: FloatArray; ids: Int32Array;
  }): void;
  /**
   * out[len, D]: PE[p, 2i] = sin(p / 10000^(2i/D)), PE[p, 2i+1] = cos(p / 10000^(2i/D)),
   * computed in double (a Float32Array receives it rounded to float32); odd D as torch_reference.py.
   */
  sinusoidalEncoding(a: { len: number; D: number; out: FloatArray }): void;
  /** ViTClassifier: out[B, N+1, D] = cat(cls [D], patches [B, N, D]) + pos [N+1, D]. */
  clsPosForward(a: {
    B: number; N: number; D: number;
    out: FloatArray; cls: FloatArray; patches: FloatArray; pos: FloatArray;
  }): void;
  /** dcls [D] += Σ_b dout[b, 0]; dpatches [B, N, D] = dout[:, 1:]; dpos [N+1, D] += Σ_b dout[b]. */
  clsPosBackward(a: {
    B: number; N: number; D: number;
    dcls: FloatArray; dpatches: FloatArray; dpos: FloatArray; dout: FloatArray;
  }): void;
  /** ViTDecoder: out[B, N, D] = token [D] + pos [N, D] (mask_token.expand(B, N, -1) + pos_embed). */
  tokenPosForward(a: { B: number; N: number; D: number; out: FloatArray; token: FloatArray; pos: FloatArray }): void;
  /** dtoken [D] += Σ_{b,n} dout[b, n]; dpos [N, D] += Σ_b dout[b]. */
  tokenPosBackward(a: { B: number; N: number; D: number; dtoken: FloatArray; dpos: FloatArray; dout: FloatArray }): void;
}
