import type { FloatArray } from './layernorm';

/** An activation fused into a GEMM epilogue (torch's ReLU, GELU, GELU(approximate='tanh')). */
export type Activation = 'none' | 'relu' | 'gelu' | 'gelu_tanh';

/** The GEMM and the Linear layer (see native/cpu/gemm.h and linear.h). Row-major throughout. */
export interface LinearOps {
  /**
   * C = act(alpha · op(A) op(B) + beta · C + bias) for each of `batch` packed entries, where
   * op(A) is [M, K] (A stored [K, M] when transA), op(B) is [K, N] (B stored [N, K] when transB),
   * C and preact are [batch, M, N], A [batch, M, K], B [batch, K, N], bias [N] (shared by every
   * entry). `preact`, when given, receives the value before the activation. Defaults: alpha 1,
   * beta 0 (C is then not read), act 'none', batch 1. Operands are packed unless lda/ldb/ldc (row
   * strides, at least a stored row) or strideA/strideB/strideC (batch strides; 0 shares one entry)
   * are given; each array then holds exactly the extent they span, e.g. A: (batch − 1)·strideA +
   * (M − 1)·lda + K elements (preact is laid out like C).
   */
  gemm(a: {
    M: number; N: number; K: number; batch?: number;
    lda?: number; ldb?: number; ldc?: number; strideA?: number; strideB?: number; strideC?: number;
    transA?: boolean; transB?: boolean; alpha?: number; beta?: number; act?: Activation;
    C: FloatArray; preact?: FloatArray | null; A: FloatArray; B: FloatArray; bias?: FloatArray | null;
  }): void;
  /**
   * y = act(x Wᵀ + b), PyTorch's nn.Linear: x [rows, inFeatures], W [outFeatures, inFeatures],
   * b [outFeatures], y and preact (the value before act, optional) [rows, outFeatures].
   */
  linearForward(a: {
    rows: number; inFeatures: number; outFeatures: number; act?: Activation;
    y: FloatArray; preact?: FloatArray | null; x: FloatArray; W: FloatArray; b?: FloatArray | null;
  }): void;
  /**
   * dx = dy W (overwritten; skipped when dx is null), dW += dyᵀ x, db += Σ_rows dy (when db is
   * given). dy [rows, outFeatures], x and dx [rows, inFeatures], W and dW [outFeatures, inFeatures].
   */
  linearBackward(a: {
    rows: number; inFeatures: number; outFeatures: number;
    dx?: FloatArray | null; dW: FloatArray; db?: FloatArray | null; dy: FloatArray; x: FloatArray; W: FloatArray;
  }): void;
}
