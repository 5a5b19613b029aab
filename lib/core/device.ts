/**
 * Devices: where a tensor's storage lives and which addon runs the ops on it. 'cpu' tensors hold
 * native host memory that JS reads directly (the CPU addon, lib/native/addon.ts). 'cuda' tensors hold an
 * opaque device buffer that only the CUDA addon (nodeformer_cuda.node, native/cuda/napi) reads; it
 * has the CPU addon's op names and option fields (one schema, native/ops/), with device buffers in
 * place of typed arrays, so the layers yield the same op requests whatever the device and the
 * program runner picks the addon from the arguments (opFunction). Host↔device copies are explicit:
 * Tensor.to('cuda' | 'cpu'). Which ops each device runs is what its addon reports: supports(op,
 * device), checked for a whole module by Module.to and by the optimizers' constructors.
 *
 * Which CUDA addon is loaded (the first time a 'cuda' tensor or module is asked for) is chosen by
 * the environment variable NF_CUDA_BACKEND:
 *   - unset or 'gpu': the real backend (nvcc-built): the optional package @nodeformer/linux-x64-cuda
 *     when it is installed, else a local build, build/cuda/nodeformer_cuda.node (`npm run build:cuda`);
 *   - 'emulator': build/cuda-emu/emulated/nodeformer_cuda.node, the same kernels compiled for the
 *     SIMT emulator, whose "device memory" is host memory (`npm run build:cuda:emu`, no nvcc, no GPU:
 *     slow, for tests);
 *   - 'none': no CUDA backend (as a build without CUDA);
 *   - any other value: the path of a nodeformer_cuda.node file.
 * Without a loadable addon, device 'cuda' throws ERR_NF_NO_CUDA ("... built without CUDA ...", naming
 * the npm install of the CUDA package).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

import { invalidArg, NodeformerError } from '../validation/errors';
import { native, nodeformerVersion, packageRoot, type OpSchemaExport, type WithAsync } from '../native/addon';
import { CUDA_ADDON, CUDA_PLATFORM, currentKey, packageName, resolvePlatformFile } from '../native/platform';
import { HOST_ONLY_OPS, Precisions, type NativeOps, type Precision } from '../native/ops.generated';

export type Device = 'cpu' | 'cuda';
export const DEVICES: readonly Device[] = ['cpu', 'cuda'];

/**
 * How a module's matrix products run (DESIGN.md: precision is a module property, the same meaning on
 * every device; README, Devices): 'fp32' (the default) float32; 'tf32' float32 tensors with the GEMMs'
 * inputs rounded to TF32 (PyTorch's allow_tf32; on the CPU, which has no TF32 unit, exactly fp32);
 * 'bf16' mixed precision as torch.autocast(dtype=bfloat16): bf16 products with float32 accumulation
 * (on CUDA with bfloat16 activations, the design: native/cuda/bf16.cuh; on the CPU the products'
 * inputs rounded to bfloat16: AMX tiles (tdpbf16ps) where the CPU has AMX-BF16, else vdpbf16ps where it
 * has AVX512_BF16 and that beats its FMA, else the same rounding with fp32 FMA, the attention core's QKᵀ
 * and PV with bf16 inputs too; in training, bfloat16 activations in the layers whose ops have a CPU
 * bf16 kernel, FeedForward and Linear so far (supportsBf16), float32 in the others); 'int8' CPU inference with dynamic
 * quantization (onnxruntime's and PyTorch's quantize_dynamic): the Linear-style products (Linear,
 * feed-forward, the attention projections, the patch embedding) take int8 weights quantized per
 * output channel once (the prepack cache) and u8 activations quantized per row, with int32 sums
 * (AMX tiles on AMX-INT8 CPUs, vpdpbusd on AVX-512 VNNI), the attention core's QKᵀ and PV with bf16
 * inputs as at 'bf16' where vdpbf16ps beats the FMA (fp32 elsewhere); training throws ERR_NF_STATE and
 * 'cuda' ERR_NF_DEVICE. Statistics, losses and the optimizer stay fp32; parameters, checkpoints and
 * state dicts are fp32 whatever the precision.
 */
export type { Precision };

/**
 * What every module config extends: where the module lives and how its products run. Neither is
 * saved with the config (a file loads on any device, at any precision).
 */
export interface PlacementConfig {
  /** Where the parameters are created: 'cpu' (default) or 'cuda', as `.to(device)` after construction (not saved with the config). */
  device?: Device;
  /**
   * How the matrix products run: 'fp32' (default), 'tf32', 'bf16' or 'int8' (CPU inference only), as
   * `.setPrecision(precision)` after construction (not saved with the config).
   */
  precision?: Precision;
}

/** Checks a precision argument ('fp32', 'tf32', 'bf16' or 'int8'). */
export function checkPrecision(name: string, precision: unknown): Precision {
  if (!Precisions.includes(precision as Precision)) invalidArg(name, "'fp32', 'tf32', 'bf16' or 'int8'", precision);
  return precision as Precision;
}

/** The ERR_NF_DEVICE of precision 'int8' on 'cuda' (int8 is CPU inference); `what` names the call. */
export function int8OnCuda(what: string): never {
  throw new NodeformerError('ERR_NF_DEVICE',
    `${what}: precision 'int8' is CPU inference (dynamic quantization); keep the model on 'cpu', or use 'fp32', 'tf32' or 'bf16' on 'cuda'`);
}

/** The ERR_NF_STATE of training at precision 'int8' (inference only); `what` names the call. */
export function int8Training(what: string): never {
  throw new NodeformerError('ERR_NF_STATE',
    `${what}: precision 'int8' is for inference only; call setPrecision('fp32') (or 'bf16') before training`);
}

/** An opaque handle to device memory (freed by the CUDA addon's free, or when collected). */
export interface DeviceBuffer {
  readonly __deviceBuffer: never;
}

/**
 * The caching allocator's counters (native/cuda/device.h). Device buffers are blocks of size classes
 * (512-byte steps up to 4 KiB, then four per power of two); a freed buffer's block is kept for the
 * next request of its class instead of being returned with cudaFree, up to `limitBytes` idle.
 */
export interface CudaMemoryStats {
  /** Capacity of the blocks held by live buffers. */
  liveBytes: number;
  /** The largest liveBytes so far. */
  peakLiveBytes: number;
  /** Capacity of the idle blocks kept for reuse. */
  cachedBytes: number;
  /** The cap on cachedBytes (NF_CUDA_CACHE_BYTES; default 8 GiB on a GPU, 1 GiB on the emulator). */
  limitBytes: number;
  /** Blocks obtained from the device (cudaMalloc) since the process started. */
  fresh: number;
  /** Requests served from the cache since the process started. */
  reused: number;
  /** Blocks given back to the device (cudaFree: over the cap, emptyCache, or to retry an allocation out of memory). */
  released: number;
  /** Bytes asked for by live buffers (their sizes before rounding to a size class). */
  requestedBytes: number;
  /** Capacity of the blocks CUDA graphs' private pools own (live or idle; lib/core/graph.ts). */
  graphBytes: number;
}

/** The CUDA addon's graph counters (native/cuda/device.h GraphStats). */
export interface CudaGraphCounters {
  /** Graphs captured and instantiated. */
  captures: number;
  /** Captures that failed. */
  failed: number;
  /** Graph launches. */
  launches: number;
  /** Graphs not yet freed. */
  live: number;
}

/** The CUDA addon's own functions: device buffers and explicit copies on the backend's stream. */
export interface CudaMemoryOps {
  /**
   * A device buffer of `bytes` from the caching allocator: zero-filled ('zero', the default: what
   * accumulates), as the block was ('none': an op's output, written whole) or all 0xFF bytes
   * ('poison': NaN in every float32, the NF_POISON_UNINITIALIZED check). Out of device memory, the
   * allocator releases its idle blocks and tries again; failing still, it throws ERR_NF_CUDA_OOM
   * (nothing allocated, the counters unchanged but for the release). `bf16`: the buffer of a bfloat16
   * tensor (only the ops' bfloat16 fields take it, and a float32 field never does).
   */
  alloc(bytes: number, init?: 'zero' | 'none' | 'poison', bf16?: boolean): DeviceBuffer;
  /** Converts a float32 buffer into a bfloat16 one of the same element count or back (nearest even; exact back). */
  cast(dst: DeviceBuffer, src: DeviceBuffer): void;
  /** Returns the buffer's block to the cache now (later uses throw; later frees are no-ops). */
  free(buffer: DeviceBuffer): void;
  /** Host → device; `src` has the buffer's byte length. */
  upload(dst: DeviceBuffer, src: Float32Array | Int32Array | Uint8Array | Uint16Array): void;
  /** Device → host (waits for the queued work); `dst` has the buffer's byte length. */
  download(dst: Float32Array | Int32Array | Uint8Array | Uint16Array, src: DeviceBuffer): void;
  /** Device → device, equal sizes. */
  copy(dst: DeviceBuffer, src: DeviceBuffer): void;
  fillZero(buffer: DeviceBuffer): void;
  /** Waits for the backend's stream. */
  synchronize(): void;
  /** Settles once everything queued on the backend's stream so far has finished (the event loop runs meanwhile). */
  synchronizeAsync(): Promise<void>;
  /** Bytes requested by live device buffers. */
  deviceAllocatedBytes(): number;
  /** The caching allocator's counters. */
  memoryStats(): CudaMemoryStats;
  /** Returns every idle cached block to the device (cudaFree). */
  emptyCache(): void;
  /** Sets the cap on idle cached bytes (0: no caching), releasing blocks over it now. */
  setCacheLimit(bytes: number): void;
  /** Whether this is the SIMT emulator, the number of devices, what runs the matrix products, and the CUDA graph counters. */
  backendInfo(): { emulated: boolean; devices: number; gemm: CudaGemmInfo; graphs: CudaGraphCounters };
  /** Starts capturing the backend stream into a CUDA graph (lib/core/graph.ts is the only caller). */
  graphBegin(): void;
  /** Ends the capture; returns the instantiated graph (throws what made the capture fail). */
  graphEnd(): object;
  /** Queues the graph on the backend stream (ERR_NF_GRAPH_STALE: a scratch buffer moved; capture again). */
  graphLaunch(graph: object): void;
  /** Whether no scratch buffer the graph uses has moved since its capture (else it must be captured again). */
  graphFresh(graph: object): boolean;
  /** graphLaunch, settled once the stream has run it. */
  graphLaunchAsync(graph: object): Promise<void>;
  /** Frees the graph; its memory pool goes back to the cache. */
  graphFree(graph: object): void;
}

/**
 * Which backend runs the CUDA matrix products (native/cuda/gemm.h): cuBLASLt, loaded at run time
 * (libcublasLt.so.13 or .12, or NF_CUBLASLT_PATH), with bias, GELU (tanh form), GELU backward and
 * bias gradient fused in its epilogues; or, without it, nodeformer's own fp32 kernel (after one
 * warning on stderr). In the emulated build, cuBLASLt is nodeformer's CPU stand-in (`standIn`).
 */
export interface CudaGemmInfo {
  backend: 'cublaslt' | 'kernel';
  /** The library is nodeformer's CPU stand-in for cuBLASLt (the emulated build's tests). */
  standIn: boolean;
  /** The cuBLASLt file loaded, or null. */
  library: string | null;
  /** Why cuBLASLt is not loaded, or null. */
  reason: string | null;
  /** cublasLtGetVersion(), e.g. 130400 for 13.4.0 (0 without the library). */
  version: number;
  /** cuBLASLt's workspace, one block of the caching allocator (allocated on the first product). */
  workspaceBytes: number;
  /**
   * Products since the process started: run by cuBLASLt (`fused`: with an epilogue; `tf32`, `bf16`: in
   * that compute mode, the modules' precision), by the own kernel, offered no algorithm.
   */
  calls: { cublaslt: number; fused: number; tf32: number; bf16: number; kernel: number; unsupported: number; heuristicQueries: number };
}

/**
 * The CUDA addon: the memory functions and the ops it has kernels for (float32 only; each op also as
 * `...Async`, which queues the same work and returns a settled Promise). Which ops those are is the
 * addon's own list (its opSchema(); supports(op, 'cuda')), not a type: an op it lacks is undefined.
 */
export type CudaBinding = CudaMemoryOps & OpSchemaExport & Partial<WithAsync<NativeOps<DeviceBuffer>>>;

/**
 * The .node file NF_CUDA_BACKEND selects (null for 'none'); for the real backend, the CUDA package's
 * when installed, else the local build's path, with why the package's was not used in `missing`.
 */
function addonFile(missing: string[]): string | null {
  const choice = process.env.NF_CUDA_BACKEND ?? '';
  if (choice === '' || choice === 'gpu') {
    const r = resolvePlatformFile(CUDA_PLATFORM, CUDA_ADDON);
    if ('file' in r) return r.file;
    missing.push(r.missing);
    return path.join(packageRoot(__dirname), 'build', 'cuda', CUDA_ADDON);
  }
  if (choice === 'emulator') return path.join(packageRoot(__dirname), 'build', 'cuda-emu', 'emulated', CUDA_ADDON);
  if (choice === 'none') return null;
  return path.resolve(choice); // (a path needs no package root: a bundled copy of the library loads it too)
}

/** How to get a CUDA backend, for ERR_NF_NO_CUDA. */
function cudaAdvice(): string {
  const install = currentKey() === 'linux-x64-gnu'
    ? `install the CUDA package, \`npm install ${packageName(CUDA_PLATFORM)}@${nodeformerVersion()}\` (NVIDIA driver for CUDA 13, sm_80 or newer), or `
    : `no CUDA package is made for ${currentKey()} (only for linux-x64 with glibc); `;
  return `${install}build the CUDA backend in a clone of the nodeformer repository with \`npm run build:cuda\` (needs nvcc), ` +
    'or run on the SIMT emulator with NF_CUDA_BACKEND=emulator after `npm run build:cuda:emu`';
}

let loaded: CudaBinding | null = null;
const buffers = new WeakSet<object>();

/**
 * The CUDA addon, loaded on first use. Throws ERR_NF_NO_CUDA when there is none, and ERR_NF_CUDA
 * when it loads but finds no usable device.
 */
export function cuda(): CudaBinding {
  if (loaded) return loaded;
  const missing: string[] = [];
  const file = addonFile(missing);
  if (file === null) throw new NodeformerError('ERR_NF_NO_CUDA', `nodeformer was built without CUDA (NF_CUDA_BACKEND=none): ${cudaAdvice()}`);
  if (!fs.existsSync(file)) {
    const looked = [...missing, `no CUDA backend at ${file}`].join('; ');
    throw new NodeformerError('ERR_NF_NO_CUDA', `nodeformer was built without CUDA (${looked}): ${cudaAdvice()}`);
  }
  let addon: CudaBinding;
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    addon = require(file) as CudaBinding;
  } catch (e) {
    throw new NodeformerError('ERR_NF_NO_CUDA', `nodeformer was built without a loadable CUDA backend (${file}: ${(e as Error).message})`);
  }
  addon.backendInfo(); // throws ERR_NF_CUDA (no driver, no device) before any tensor is made
  const alloc = addon.alloc;
  loaded = {
    ...addon,
    alloc: (bytes: number, init?: 'zero' | 'none' | 'poison', bf16?: boolean) => {
      const b = alloc(bytes, init, bf16);
      buffers.add(b);
      return b;
    },
  };
  return loaded;
}

/**
 * The CUDA caching allocator's counters (fresh vs reused blocks, live, peak and idle bytes): see
 * CudaMemoryStats. Loads the CUDA addon (ERR_NF_NO_CUDA without one).
 */
export function cudaMemoryStats(): CudaMemoryStats {
  return cuda().memoryStats();
}

/**
 * Returns the idle blocks of the CUDA caching allocator to the device, as torch.cuda.empty_cache():
 * for other processes, or before a phase that needs memory of other sizes. Live tensors are not
 * affected. Loads the CUDA addon (ERR_NF_NO_CUDA without one).
 */
export function cudaEmptyCache(): void {
  cuda().emptyCache();
}

/** Whether any CUDA buffer was made in this process (until then every op runs on the CPU addon). */
export function cudaInUse(): boolean {
  return loaded !== null;
}

/** Whether `v` is a device buffer of the CUDA addon. */
export function isDeviceBuffer(v: unknown): v is DeviceBuffer {
  return typeof v === 'object' && v !== null && buffers.has(v);
}

/** Checks a device argument ('cpu' or 'cuda'); 'cuda' also loads the CUDA addon (or throws ERR_NF_NO_CUDA). */
export function checkDevice(name: string, device: unknown): Device {
  if (!DEVICES.includes(device as Device)) invalidArg(name, "'cpu' or 'cuda'", device);
  if (device === 'cuda') cuda();
  return device as Device;
}

/** The ops an addon reports in its op schema: each name, and whether it has a kernel for bfloat16 activations. */
function schemaOps(addon: OpSchemaExport): ReadonlyMap<string, boolean> {
  return new Map((JSON.parse(addon.opSchema()) as { name: string; bf16?: boolean }[]).map((o) => [o.name, o.bf16 === true]));
}

let cpuOps: ReadonlyMap<string, boolean> | null = null;
let cudaOps: ReadonlyMap<string, boolean> | null = null;

/**
 * The ops `device` runs: the CPU addon's, or the CUDA addon's (none when there is no CUDA backend).
 * Both come from the addons themselves (native/cpu/napi/bind_ops.cpp, native/cuda/napi/bind_ops.cpp
 * register every op with a kernel), so there is no list to keep by hand.
 */
export function supportedOps(device: Device): ReadonlySet<string> {
  return new Set(opKernels(device).keys());
}

/** The ops `device` runs, each with whether it has a kernel for bfloat16 activations. */
function opKernels(device: Device): ReadonlyMap<string, boolean> {
  if (device === 'cpu') return (cpuOps ??= schemaOps(native));
  if (cudaOps) return cudaOps;
  let addon: CudaBinding;
  try {
    addon = cuda();
  } catch {
    return new Map();
  }
  return (cudaOps = schemaOps(addon));
}

/** Whether `device` has a kernel for op `op` (e.g. supports('tokenPosForward', 'cuda')). */
export function supports(op: string, device: Device): boolean {
  return opKernels(device).has(op);
}

/**
 * Whether `device` runs op `op` on bfloat16 activations (precision 'bf16''s storage; its addon's opSchema()
 * says so per op: on the CPU the feed-forward and Linear ops so far, and adamwMultiStep's weight copies; on
 * CUDA most).
 */
export function supportsBf16(op: string, device: Device): boolean {
  return opKernels(device).get(op) === true;
}

/**
 * Throws ERR_NF_DEVICE, before anything runs, when `device` lacks a kernel for any of `ops`, naming
 * every one of them and `what` needs them (e.g. 'ViTDecoder', 'SGD').
 */
export function checkSupported(device: Device, ops: Iterable<string>, what: string): void {
  const have = supportedOps(device);
  const missing = [...new Set(ops)].filter((op) => !have.has(op)).sort();
  if (missing.length === 0) return;
  throw new NodeformerError('ERR_NF_DEVICE',
    `${what} cannot run on ${device}: the ${device === 'cuda' ? 'CUDA' : 'CPU'} backend has no kernel for ` +
      `${missing.join(', ')} (${missing.length > 1 ? 'ops' : 'an op'} it would run); keep it on cpu`);
}

/**
 * The ops that `objects` (a module tree, an optimizer) declare they run: the static `ops` of each
 * one's class and of every class it extends (Module.ops, Optimizer.ops), added up. Declared, never
 * guessed: test/ops_schema.test.ts runs every model and optimizer with the op calls recorded and
 * checks that each op run is a declared one.
 */
export function declaredOps(objects: Iterable<object>): Set<string> {
  const ops = new Set<string>();
  for (const obj of objects)
    for (let c = obj.constructor as { ops?: unknown } | undefined; c && c !== Object; c = Object.getPrototypeOf(c))
      if (Object.hasOwn(c, 'ops') && Array.isArray(c.ops)) for (const op of c.ops as string[]) ops.add(op);
  return ops;
}

/** The ops the op schema marks host-only (packWeights, fmaPeak): CPU work by nature, which no device is asked for. */
const hostOnlyOps: ReadonlySet<string> = new Set(HOST_ONLY_OPS);

/**
 * The check Module.to and the optimizers' constructors run before anything moves or is allocated
 * on `device`: every op that `objects` declare (declaredOps), host-only ones aside, must have a
 * kernel there, else ERR_NF_DEVICE names all the missing ones (rather than a step failing halfway
 * at the first of them). The CPU runs every op.
 */
export function checkDeviceOps(device: Device, objects: Iterable<object>, what: string): void {
  if (device === 'cpu') return;
  checkSupported(device, [...declaredOps(objects)].filter((op) => !hostOnlyOps.has(op)), what);
}
