/**
 * Instruction-set variants of the CPU kernels: scalar, avx2, avx512 and avx512bf16 in an x64 build,
 * scalar and neon in an arm64 one (isaInfo().compiled lists this build's, slowest first).
 */
export type Isa = 'scalar' | 'avx2' | 'avx512' | 'avx512bf16' | 'neon';

/** A kernel variant the load-time self-check rejected, and why (which outputs disagreed, by how much). */
export interface IsaRejection {
  isa: Isa;
  reason: string;
}

/**
 * Which CPU kernel variant runs. At load, a known-answer self-check runs every kernel family on a
 * tiny fixed input under each variant the CPU has and under the scalar one; a variant that
 * disagrees is never used (the next one down is).
 */
export interface IsaInfo {
  /** The variant the kernels run now. */
  active: Isa;
  /** The best variant this CPU and OS can run. */
  detected: Isa;
  /**
   * The BF16 dot product's FLOP rate (vdpbf16ps, what avx512bf16 adds to avx512: the products at
   * precision 'bf16') over the fp32 FMA's, measured at load; 0 where the CPU lacks it. Below 1 (an
   * Intel Xeon measured 0.5; Zen 4 about 2) the load picks avx512 instead, whose 'bf16' computes the
   * same function with fp32 FMAs, unless NF_ISA=avx512bf16 asks for it.
   */
  bf16DotRatio: number;
  /**
   * The kernels precision 'int8' runs on the active variant: 'amx' (tdpbusd tiles: Intel Sapphire
   * Rapids and later, on Linux; NF_AMX=0 turns them off), 'vnni' (vpdpbusd: AVX-512 VNNI), 'avx2'
   * (int16 products) or 'scalar'. Every one computes the same int32 sums, so the same results.
   */
  int8Kernels: 'amx' | 'vnni' | 'avx2' | 'scalar';
  /**
   * The kernels of precision 'bf16''s matrix products on the active variant: 'amx' (tdpbf16ps tiles,
   * avx512bf16 on an Intel CPU with AMX-BF16, Linux; NF_AMX=0 turns them off), 'vdpbf16ps'
   * (avx512bf16 elsewhere) or 'fp32' (the other variants: the bf16 rounding with fp32 FMAs). The load
   * picks avx512bf16 where it has AMX or its vdpbf16ps beats the FMA (bf16DotRatio above 1).
   */
  bf16Kernels: 'amx' | 'vdpbf16ps' | 'fp32';
  /** The variants setIsa accepts: those the CPU runs that passed the self-check. */
  available: Isa[];
  /** The variants in the binary, slowest first (scalar, avx2, avx512 on x64; scalar, neon on arm64). */
  compiled: Isa[];
  /** The variants the self-check rejected. */
  rejected: IsaRejection[];
  /** The self-check: its duration, its tolerance (relative error against the scalar variant), and each variant's largest error (NaN: it produced a NaN). */
  selfCheck: { ms: number; tolerance: number; checked: { isa: Isa; maxError: number }[] };
}

/** Core functions of the addon: ISA selection, threads, and the helpers of tensor memory. */
export interface CoreOps {
  /** The active ISA, those this CPU can run, those compiled in, and the load-time self-check's verdict. */
  isaInfo(): IsaInfo;
  /** The variant the kernels run now (isaInfo().active, without the rest). */
  activeIsa(): Isa;
  /** Switches the CPU kernels to `isa`; throws if this CPU cannot run it or the self-check rejected it. */
  setIsa(isa: Isa): void;
  /**
   * True exactly once per process when the self-check rejected a variant (for the loader's one
   * warning, whatever the number of threads or contexts loading the addon); false otherwise.
   */
  claimSelfCheckWarning(): boolean;
  numThreads(): number;
  /** Resizes the kernel thread pool; 0 means one thread per core. */
  setNumThreads(n: number): void;
  /** Microseconds idle pool threads spin before they sleep (0 unless NF_THREAD_SPIN_US says otherwise). */
  threadSpin(): number;
  /**
   * Lets idle pool threads spin up to `microseconds` (integer, 0 to 10000; 0 = sleep at once, the
   * default) waiting for the next parallel region, as OpenMP's and onnxruntime's threads do: about
   * 100 saves a wake-up per region on an idle machine (inference 2-4% faster on 2 cores), but costs
   * when another process shares the cores (5-10% slower with one busy neighbour on 2 cores).
   */
  setThreadSpin(microseconds: number): void;
  /** Bytes from the start of `buffer` to its first 64-byte aligned address (0 to 63). */
  alignedOffset(buffer: ArrayBuffer): number;
  /**
   * Detaches `buffer`, which frees its memory now (and empties every view of it); while an async op
   * uses the buffer, when that op settles. Later releases are no-ops.
   */
  release(buffer: ArrayBuffer): void;
  /**
   * dst = src converted between float32 and bfloat16 storage: a Float32Array rounded into a Uint16Array
   * of bf16 bits (to nearest even, denormals to zero, as the kernels round), or bits widened back
   * (exactly); the same length. On the thread pool.
   */
  castBf16(src: Float32Array | Uint16Array, dst: Uint16Array | Float32Array): void;
  /**
   * The malloc settings the addon applied at load so freed tensor memory is reused rather than
   * returned to the system and faulted in again (glibc only; NF_MALLOC_TUNING=0 skips it).
   */
  mallocPolicy(): { applied: boolean; mmapThreshold: number; trimThreshold: number };
}
