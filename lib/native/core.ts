/** Instruction-set variants of the CPU kernels. */
export type Isa = 'scalar' | 'avx2' | 'avx512';

/** Core functions of the addon: ISA selection, threads and aligned native memory. */
export interface CoreOps {
  /** The active ISA, the best this CPU runs, those it can run, and those compiled in. */
  isaInfo(): { active: Isa; detected: Isa; available: Isa[]; compiled: Isa[] };
  /** Switches the CPU kernels to `isa`; throws if this CPU cannot run it. */
  setIsa(isa: Isa): void;
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
