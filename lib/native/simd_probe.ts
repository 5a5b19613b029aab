import type { Isa } from './core';

/** The names simdProbe knows (native/cpu/simd_probe.cpp lists what each does with the arrays). */
export type SimdHelper =
  | 'vzero' | 'vload' | 'vset1' | 'vabs' | 'vsqrt' | 'vround' | 'vpow2i' | 'vexp' | 'vnormcdf' | 'vnormcdf_exp' | 'vnormcdf_reduced' | 'vtanh'
  | 'vadd' | 'vsub' | 'vmul' | 'vdiv' | 'vmax' | 'vmin' | 'vcopysign' | 'vfma' | 'vfnma' | 'vselect_pos'
  | 'vselect_lt' | 'vsum' | 'vhmax' | 'vload_n' | 'vstore_n' | 'vload_w' | 'vstore_w' | 'vround_bf16_n' | 'act_forward' | 'act_derivative'
  | 'act_tile' | 'act_derivative_tile'
  | 'act_forward_n' | 'act_backward_n' | 'pack_k_major' | 'pack_transposed' | 'transpose_8x8'
  | 'first_nonfinite_range' | 'vround_bf16' | 'vdot_bf16' | 'pack_bf16_pair_rows' | 'pack_bf16_row' | 'int8_dot_tile' | 'int8_amx_tile' | 'int8_quantize';

/** Test hook for the SIMD vocabulary (see native/cpu/simd_probe.h); not part of the public API. */
export interface SimdProbeOps {
  /**
   * Runs ISA-specific helper `fn` of variant `isa` (even one the load-time self-check rejected)
   * on operands a..d (Float32Arrays of one length), writing `out`; `args` holds up to 4 integer
   * parameters (tail length, panel height, strides, ...). Returns the variant's lane width W.
   */
  simdProbe(a: {
    isa: Isa; fn: SimdHelper; out: Float32Array;
    a?: Float32Array; b?: Float32Array; c?: Float32Array; d?: Float32Array; args?: Int32Array;
  }): number;
}
