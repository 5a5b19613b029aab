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
  /** A zero-filled, 64-byte aligned ArrayBuffer in native memory, freed by the GC. */
  allocate(byteLength: number): ArrayBuffer;
  /** Frees a buffer from `allocate` now (detaching it); later releases are no-ops. */
  release(buffer: ArrayBuffer): void;
  /** Bytes of `allocate` buffers not yet freed (tensors, parameters, optimizer state), in every context. */
  allocatedBytes(): number;
}
