/**
 * Prepacked weights for inference. Every Linear-style product y = x Wᵀ runs through a GEMM that
 * first copies W into its micro-panel layout; at a few hundred rows per product (ViT-B/16 at batch
 * 1) that copy is several percent of an inference step, and in generation (a few rows per step) it
 * is most of the product. So in eval mode on the CPU a Linear packs its weight once (the packWeights
 * op, native/ops/packed.h) and hands the packing to the ops it and its parents run (linearForward,
 * feedforwardForward, attentionForward, attentionDecode), which then read it instead of packing W,
 * with bit-identical results (onnxruntime prepacks the same way when a session is created).
 *
 * A packing is rebuilt when its weight changes (Tensor.version: writes through `data`, copyFrom,
 * loadStateDict, optimizer steps), the kernels' ISA variant does (native.setIsa) or the module's
 * precision does (a 'bf16' packing holds the weight rounded to bfloat16, as bf16 pairs on the
 * avx512bf16 variant; 'fp32' and 'tf32' share the fp32 one), and freed when
 * the model goes back to training (train()), moves (to()) or is disposed. Memory: a packing is about
 * as large as its weight (16 + in·32·⌈out / 32⌉ floats), so a model in eval mode holds its Linear
 * weights twice; setWeightPrepacking(false) (or NF_PREPACK=0) turns prepacking off.
 */
import { invalidArg } from '../validation/errors';
import { native } from '../native/addon';
import type { Isa } from '../native/core';
import type { Precision } from '../native/ops.generated';
import { op, type Program } from './program';
import { inPool } from './recycle';
import { Tensor } from './tensor';

let enabled = process.env.NF_PREPACK !== '0';

/**
 * Turns weight prepacking on (the default) or off for every module: on, a Linear in eval mode on the
 * CPU keeps a packed copy of its weight (about its size again) that spares the kernels repacking it
 * on every call; off, the next forward frees such copies and packs on every call as in training.
 * The environment variable NF_PREPACK=0 sets the initial value to off.
 */
export function setWeightPrepacking(on: boolean): void {
  if (typeof on !== 'boolean') invalidArg('on', 'a boolean', on);
  enabled = on;
}

/** Whether weight prepacking is on (see setWeightPrepacking). */
export function weightPrepacking(): boolean {
  return enabled;
}

/**
 * The packing of a weight [N, K] (y = x Wᵀ): 16 + K · 32 · ⌈N / 32⌉ floats, or at precision 'int8'
 * 16 + 32 · ⌈N / 32⌉ · (2 + ⌈K / 4⌉) (native/ops/packed.h).
 */
export function packedSize(N: number, K: number, precision: Precision = 'fp32'): number {
  return precision === 'int8' ? 16 + 32 * Math.ceil(N / 32) * (2 + Math.ceil(K / 4)) : 16 + K * 32 * Math.ceil(N / 32);
}

/**
 * The packed copy of one weight [N, K] in the layout of the active CPU kernels, kept up to date by
 * `current` and freed by `free`.
 */
export class PackedWeight {
  private packed: Tensor<'float32'> | null = null;
  /** The weight's version, the ISA variant and the packing's precision ('fp32', 'bf16' or 'int8'). */
  private madeFor: { version: number; isa: Isa; precision: Precision } | null = null;

  constructor(private readonly weight: Tensor<'float32'>) {}

  /**
   * The program returning the packing's storage for ops run at `precision`, packing the weight first
   * when it has none or the weight, the ISA variant or the packing's precision changed since; or null
   * (freeing any packing) when `wanted` is false (training mode), prepacking is off or the weight is
   * not on the CPU. The packing's precision: 'int8' (the int8 packing) for 'int8', 'bf16' (bf16 panels)
   * for 'bf16', 'fp32' otherwise (the CPU computes 'tf32' as 'fp32').
   */
  *current(wanted: boolean, precision: Precision): Program<Float32Array | null> {
    const w = this.weight;
    if (!wanted || !enabled || w.device !== 'cpu') {
      this.free();
      return null;
    }
    const isa = native.activeIsa(), made = this.madeFor;
    const kind: Precision = precision === 'int8' || precision === 'bf16' ? precision : 'fp32';
    if (this.packed && made && made.version === w.version && made.isa === isa && made.precision === kind) return this.packed.data;
    const [N, K] = w.shape;
    if (this.packed && this.packed.size !== packedSize(N, K, kind)) this.free();
    this.packed ??= inPool(null, () => Tensor.empty([packedSize(N, K, kind)], 'float32'));
    this.madeFor = null; // (a packing that fails halfway is redone next time)
    yield* packOps(N, K, kind, w.hostValues(), this.packed.data);
    this.madeFor = { version: w.version, isa, precision: kind };
    return this.packed.data;
  }

  /** Frees the packing (the next `current` packs again). */
  free(): void {
    this.packed?.dispose();
    this.packed = null;
    this.madeFor = null;
  }
}

/**
 * The program of one packWeights op. A free function, not a method: Module.to reads the modules'
 * methods for the ops a model needs on a device (lib/core/device.ts requestedOps), and this one, which
 * runs on the CPU only, is no op a model needs on 'cuda'.
 */
function* packOps(N: number, K: number, precision: Precision, W: Float32Array, packed: Float32Array): Program<void> {
  yield* op('packWeights', { N, K, precision, W, packed });
}
