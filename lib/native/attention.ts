import type { FloatArray } from './layernorm';

/**
 * Masks, dims and dropout shared by both attention ops. Self-attention when `memory` is absent
 * (keys/values from x, Tk = Tq), cross-attention (keys/values from memory [B, Tk, D]) otherwise.
 * Masks are Uint8Array with PyTorch's meaning: nonzero = the pair may NOT be attended to. A query
 * row whose keys are all blocked outputs 0 and passes no gradient.
 */
export interface AttentionCommonArgs {
  /** Batch, query length, key length (default Tq; must equal Tq for self-attention), model width, heads (D % H == 0). */
  B: number; Tq: number; Tk?: number; D: number; H: number;
  /** Cross-attention keys/values source [B, Tk, D]; absent for self-attention. */
  memory?: FloatArray | null;
  /** Blocks key j for query i when j > i. */
  causal?: boolean;
  /** [B, Tk], nonzero = padding (blocked for every query). */
  keyPaddingMask?: Uint8Array | null;
  /** [Tq, Tk] (shared by the batch) or [B, Tq, Tk]; the length decides. */
  attnMask?: Uint8Array | null;
  /**
   * Dropout probability on the attention weights, in [0, 1) (default 0). Weight (b, h, i, j) uses
   * element ((b*H + h)*Tq + i)*Tk + j of the Philox stream (seed, offset); kept weights are scaled
   * by 1/(1-p). Backward must get the same dropoutP, seed and offset as the forward.
   */
  dropoutP?: number; seed?: number; offset?: number;
}

/**
 * The forward's saved buffers, which backward takes back: self-attention `qkv` [B, T, 3D] (Q | K | V
 * of each token, heads interleaved along D); cross-attention `q` [B, Tq, D] and `kv` [B, Tk, 2D]
 * (K | V); `ctx` [B, Tq, D], the heads' outputs before the output projection; `lse` [B, H, Tq],
 * each row's log Σ exp(score) (-Infinity for a fully blocked row).
 */
export interface AttentionSaved {
  qkv?: FloatArray | null; q?: FloatArray | null; kv?: FloatArray | null;
  ctx: FloatArray; lse: FloatArray;
}

/** Multi-head attention layer (torch_reference.py MultiHeadAttention; see native/cpu/attention.h). */
export interface AttentionOps {
  /**
   * out [B, Tq, D] = proj(softmax(Q Kᵀ / √Dh, masked) (dropped out) V) with Q = x Wqᵀ + bq and
   * K, V = src Wkᵀ + bk, src Wvᵀ + bv (src = memory or x). Weights: qkvWeight [3D, D] (rows q, k, v),
   * qkvBias [3D], projWeight [D, D], projBias [D] (biases optional). `weights` (optional output)
   * receives the pre-dropout attention weights [B, H, Tq, Tk]. Fills the saved buffers.
   */
  attentionForward(a: AttentionCommonArgs & AttentionSaved & {
    out: FloatArray; weights?: FloatArray | null;
    x: FloatArray; qkvWeight: FloatArray; qkvBias?: FloatArray | null;
    projWeight: FloatArray; projBias?: FloatArray | null;
  }): void;
  /**
   * From dout [B, Tq, D]: overwrites dx [B, Tq, D] and (cross-attention, optional) dMemory
   * [B, Tk, D]; accumulates (+=) dQkvWeight, dQkvBias, dProjWeight, dProjBias (the biases'
   * gradients optional). Takes the forward's inputs, weights, masks, dropout and saved buffers.
   */
  attentionBackward(a: AttentionCommonArgs & AttentionSaved & {
    dx: FloatArray; dMemory?: FloatArray | null;
    dQkvWeight: FloatArray; dQkvBias?: FloatArray | null; dProjWeight: FloatArray; dProjBias?: FloatArray | null;
    dout: FloatArray; x: FloatArray; qkvWeight: FloatArray; projWeight: FloatArray;
  }): void;
  /**
   * One step of incremental decoding with a key/value cache (float32 only, no dropout): the query
   * row x [B, D] is projected and attends to either (self-attention) `cache` [B, maxT, 2D], after
   * this step's K|V are written into row `t` (keys 0..t), or (cross-attention) `kv` [B, Tk, 2D],
   * the memory's precomputed K|V (rows D..3D-1 of qkvWeight applied to memory) with an optional
   * keyPaddingMask [B, Tk]. out [B, D] = the attention layer's output for that row.
   */
  attentionDecode(a: {
    B: number; D: number; H: number; out: Float32Array; x: Float32Array;
    qkvWeight: Float32Array; qkvBias?: Float32Array | null; projWeight: Float32Array; projBias?: Float32Array | null;
  } & ({ cache: Float32Array; t: number; maxT: number } | { kv: Float32Array; Tk: number; keyPaddingMask?: Uint8Array | null })): void;
}
