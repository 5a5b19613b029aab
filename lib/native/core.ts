/** Instruction-set variants of the CPU kernels. */
export type Isa = 'scalar' | 'avx2' | 'avx512';

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
  /** The variants setIsa accepts: those the CPU runs that passed the self-check. */
  available: Isa[];
  /** The variants in the binary. */
  compiled: Isa[];
  /** The variants the self-check rejected. */
  rejected: IsaRejection[];
  /** The self-check: its duration, its tolerance (relative error against the scalar variant), and each variant's largest error (NaN: it produced a NaN). */
  selfCheck: { ms: number; tolerance: number; checked: { isa: Isa; maxError: number }[] };
}

/** Core functions of the addon: ISA selection, threads and aligned native memory. */
export interface CoreOps {
  /** The active ISA, those this CPU can run, those compiled in, and the load-time self-check's verdict. */
  isaInfo(): IsaInfo;
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
  /**
   * A 64-byte aligned ArrayBuffer in native memory (reusing a cached block when one fits), freed
   * by the GC. Zero-filled, unless `uninitialized`: then it holds whatever its block held (all-ones
   * bytes, NaN as float32, when the NF_POISON_UNINITIALIZED environment variable is set).
   */
  allocate(byteLength: number, uninitialized?: boolean): ArrayBuffer;
  /** Frees a buffer from `allocate` now (detaching it); later releases are no-ops. */
  release(buffer: ArrayBuffer): void;
  /** Bytes of `allocate` buffers not yet freed (tensors, parameters, optimizer state), in every context. */
  allocatedBytes(): number;
  /**
   * The tensor-memory cache's counters: bytes handed out (`liveBytes`, in size-class capacity) and
   * kept idle for reuse (`cachedBytes`, at most `cacheLimit`), and how many blocks came from the
   * system (`fresh`) or from the cache (`reused`) since the process started. A steady training
   * loop stops adding `fresh` blocks after its first step.
   */
  allocatorStats(): { liveBytes: number; cachedBytes: number; fresh: number; reused: number; cacheLimit: number };
  /** Returns the cache's idle blocks to the system (tensors in use are untouched). */
  emptyCache(): void;
  /** Caps the idle bytes the cache keeps (default 256 MiB, or the NF_CACHE_BYTES environment variable; 0 disables it). */
  setCacheLimit(bytes: number): void;
}
