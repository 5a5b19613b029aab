/** Instruction-set variants of the CPU kernels. */
export type Isa = 'scalar' | 'avx2' | 'avx512';

/** Core functions of the addon: ISA selection, threads, and the helpers of tensor memory. */
export interface CoreOps {
  /** The active ISA, the best this CPU runs, those it can run, and those compiled in. */
  isaInfo(): { active: Isa; detected: Isa; available: Isa[]; compiled: Isa[] };
  /** Switches the CPU kernels to `isa`; throws if this CPU cannot run it. */
  setIsa(isa: Isa): void;
  numThreads(): number;
  /** Resizes the kernel thread pool; 0 means one thread per core. */
  setNumThreads(n: number): void;
  /** Bytes from the start of `buffer` to its first 64-byte aligned address (0 to 63). */
  alignedOffset(buffer: ArrayBuffer): number;
  /**
   * Detaches `buffer`, which frees its memory now (and empties every view of it); while an async op
   * uses the buffer, when that op settles. Later releases are no-ops.
   */
  release(buffer: ArrayBuffer): void;
  /**
   * The malloc settings the addon applied at load so freed tensor memory is reused rather than
   * returned to the system and faulted in again (glibc only; NF_MALLOC_TUNING=0 skips it).
   */
  mallocPolicy(): { applied: boolean; mmapThreshold: number; trimThreshold: number };
}
