/**
 * Devices: where a tensor's storage lives and which addon runs the ops on it. 'cpu' tensors hold
 * native host memory that JS reads directly (the CPU addon, lib/native.ts). 'cuda' tensors hold an
 * opaque device buffer that only the CUDA addon (nodeformer_cuda.node, native/cuda/napi) reads; it
 * has the CPU addon's op names and option fields, with device buffers in place of typed arrays, so
 * the layers yield the same op requests whatever the device and the program runner picks the addon
 * from the arguments (opFunction). Host↔device copies are explicit: Tensor.to('cuda' | 'cpu').
 *
 * Which CUDA addon is loaded (the first time a 'cuda' tensor or module is asked for) is chosen by
 * the environment variable NF_CUDA_BACKEND:
 *   - unset or 'gpu': build/cuda/nodeformer_cuda.node, the real backend (`npm run build:cuda`, nvcc);
 *   - 'emulator': build/cuda-emu/emulated/nodeformer_cuda.node, the same kernels compiled for the
 *     SIMT emulator, whose "device memory" is host memory (`npm run build:cuda:emu`, no nvcc, no GPU:
 *     slow, for tests);
 *   - 'none': no CUDA backend (as a build without CUDA);
 *   - any other value: the path of a nodeformer_cuda.node file.
 * Without a loadable addon, device 'cuda' throws ERR_NF_NO_CUDA ("... built without CUDA ...").
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

import { invalidArg, NodeformerError } from './errors';
import { packageRoot, type WithAsync } from './native';
import type { AttentionOps } from './native/attention';
import type { ElementwiseOps } from './native/elementwise';
import type { EmbeddingOps } from './native/embedding';
import type { FeedForwardOps } from './native/feedforward';
import type { LayerNormOps } from './native/layernorm';
import type { LinearOps } from './native/linear';
import type { LossOps } from './native/loss';
import type { OptimOps } from './native/optim';
import type { PatchEmbedOps } from './native/patch_embed';

export type Device = 'cpu' | 'cuda';
export const DEVICES: readonly Device[] = ['cpu', 'cuda'];

/** An opaque handle to device memory (freed by the CUDA addon's free, or when collected). */
export interface DeviceBuffer {
  readonly __deviceBuffer: never;
}

/** The CUDA addon's own functions: device buffers and explicit copies on the backend's stream. */
export interface CudaMemoryOps {
  /** A zero-filled device buffer of `bytes`. */
  alloc(bytes: number): DeviceBuffer;
  /** Frees the buffer now (later uses throw; later frees are no-ops). */
  free(buffer: DeviceBuffer): void;
  /** Host → device; `src` has the buffer's byte length. */
  upload(dst: DeviceBuffer, src: Float32Array | Int32Array | Uint8Array): void;
  /** Device → host (waits for the queued work); `dst` has the buffer's byte length. */
  download(dst: Float32Array | Int32Array | Uint8Array, src: DeviceBuffer): void;
  /** Device → device, equal sizes. */
  copy(dst: DeviceBuffer, src: DeviceBuffer): void;
  fillZero(buffer: DeviceBuffer): void;
  /** Waits for the backend's stream. */
  synchronize(): void;
  /** Bytes held by live device buffers. */
  deviceAllocatedBytes(): number;
  /** Whether this is the SIMT emulator, and the number of devices. */
  backendInfo(): { emulated: boolean; devices: number };
}

/**
 * The CUDA addon: the memory functions and the layer ops it implements (float32 only; each op also
 * as `...Async`, which queues the same work and returns a settled Promise).
 */
export type CudaBinding = CudaMemoryOps &
  WithAsync<
    Pick<LinearOps, 'linearForward' | 'linearBackward'> & LayerNormOps &
    Pick<AttentionOps, 'attentionForward' | 'attentionBackward'> & FeedForwardOps & PatchEmbedOps &
    Pick<EmbeddingOps, 'embeddingForward' | 'embeddingBackward' | 'clsPosForward' | 'clsPosBackward'> & ElementwiseOps &
    Pick<LossOps, 'crossEntropy'> & Pick<OptimOps, 'adamwStep'> & HostCopyOps
  >;

/** Ops the CPU addon lacks, written in JS for the CPU (lib/program.ts) and in CUDA for the GPU. */
export interface HostCopyOps {
  /**
   * dst[dstOffset + r·dstStride + c] = src[srcOffset + r·srcStride + c] for r < rows, c < cols: a
   * block of rows between two row-major buffers (e.g. the CLS rows out of [B, T, D] tokens).
   */
  copyRows(a: {
    rows: number; cols: number; dst: Float32Array; dstStride: number; dstOffset?: number;
    src: Float32Array; srcStride: number; srcOffset?: number;
  }): void;
}

/** The .node file NF_CUDA_BACKEND selects, or null for 'none'. */
function addonFile(): string | null {
  const choice = process.env.NF_CUDA_BACKEND ?? '';
  const root = packageRoot(__dirname);
  if (choice === '' || choice === 'gpu') return path.join(root, 'build', 'cuda', 'nodeformer_cuda.node');
  if (choice === 'emulator') return path.join(root, 'build', 'cuda-emu', 'emulated', 'nodeformer_cuda.node');
  if (choice === 'none') return null;
  return path.resolve(choice);
}

let loaded: CudaBinding | null = null;
const buffers = new WeakSet<object>();

/**
 * The CUDA addon, loaded on first use. Throws ERR_NF_NO_CUDA when there is none, and ERR_NF_CUDA
 * when it loads but finds no usable device.
 */
export function cuda(): CudaBinding {
  if (loaded) return loaded;
  const file = addonFile();
  const how = 'build the CUDA backend with `npm run build:cuda` (needs nvcc), or run on the SIMT emulator ' +
    'with NF_CUDA_BACKEND=emulator after `npm run build:cuda:emu`';
  if (file === null) throw new NodeformerError('ERR_NF_NO_CUDA', `nodeformer was built without CUDA (NF_CUDA_BACKEND=none): ${how}`);
  if (!fs.existsSync(file))
    throw new NodeformerError('ERR_NF_NO_CUDA', `nodeformer was built without CUDA (no CUDA backend at ${file}): ${how}`);
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
    alloc: (bytes: number) => {
      const b = alloc(bytes);
      buffers.add(b);
      return b;
    },
  };
  return loaded;
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
