/**
 * Float tensors are Float32Array for the fast kernels, or Float64Array (every float argument of
 * the call) for the float64 reference twin. Shapes are row-major and given by the dims fields.
 */
export type FloatArray = Float32Array | Float64Array;

/** LayerNorm over rows of width D (see native/cpu/layernorm.h). */
export interface LayerNormOps {
  /** out = LN(x) (or LN(x + residual), writing that sum to `sum`); saves mean and rstd [rows]. */
  layernormForward(a: {
    rows: number; D: number; eps?: number;
    out: FloatArray; mean: FloatArray; rstd: FloatArray; sum?: FloatArray | null;
    x: FloatArray; residual?: FloatArray | null; gamma: FloatArray; beta: FloatArray;
  }): void;
  /** dx = LN'ᵀ dout (+ dadd); dgamma += Σ dout·x̂; dbeta += Σ dout. */
  layernormBackward(a: {
    rows: number; D: number;
    dx: FloatArray; dgamma: FloatArray; dbeta: FloatArray; dout: FloatArray; dadd?: FloatArray | null;
    x: FloatArray; mean: FloatArray; rstd: FloatArray; gamma: FloatArray;
  }): void;
}
