import type { FloatArray } from './layernorm';

/** The finite scan behind checkFinite mode (see native/cpu/finite.h). */
export interface FiniteOps {
  /**
   * index[0] = the first position i < n of a NaN or ±Inf in x, or −1 when every value is finite.
   * `index` is a Float64Array of length 1 whatever x is (positions can pass 2^31); a Float64Array
   * x runs the reference twin.
   */
  firstNonFinite(a: { n: number; x: FloatArray; index: Float64Array }): void;
}
