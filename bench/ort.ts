/**
 * The onnxruntime-node peer (inference), run inside a worker process: the ONNX export of the same
 * model (scripts/export_onnx.py) on the same inputs, CPU execution provider, `threads` intra-op
 * threads, one inter-op thread, sequential execution, every graph optimisation on; intra-op
 * threads spinning or not (variants.ts).
 */
import * as fs from 'node:fs';

import type * as Ort from 'onnxruntime-node';

import { loadInputs } from './workloads';
import type { Arch } from './specs';

/** onnxruntime-node, or the reason it cannot be loaded (not installed, no binary for this platform). */
export function loadOrt(): { ort: typeof Ort } | { reason: string } {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return { ort: require('onnxruntime-node') as typeof Ort };
  } catch (e) {
    return { reason: `onnxruntime-node cannot be loaded: ${(e as Error).message.split('\n')[0]}` };
  }
}

export interface OrtRun {
  run: () => Promise<Float32Array>;
  version: string;
}

/** A session over `onnxPath` and a function running it on the inputs of `inputsPath`. */
export async function ortSession(ort: typeof Ort, arch: Arch, onnxPath: string, inputsPath: string, threads: number, spinning: boolean): Promise<OrtRun> {
  const session = await ort.InferenceSession.create(onnxPath, {
    executionProviders: ['cpu'], intraOpNumThreads: threads, interOpNumThreads: 1,
    executionMode: 'sequential', graphOptimizationLevel: 'all',
    extra: { session: { intra_op: { allow_spinning: spinning ? '1' : '0' } } },
  });
  const x = loadInputs(inputsPath);
  const int64 = (t: NonNullable<typeof x.src>) => new ort.Tensor('int64', BigInt64Array.from(t.data as Int32Array, (v) => BigInt(v)), [...t.shape]);
  const feeds: Record<string, Ort.Tensor> = arch.kind === 'vit'
    ? { images: new ort.Tensor('float32', x.images!.data as Float32Array, [...x.images!.shape]) }
    : { src: int64(x.src!), tgt: int64(x.tgt!) };
  return {
    run: async () => (await session.run(feeds)).logits.data as Float32Array,
    version: ort.env.versions.node ?? 'unknown',
  };
}

/** max |a − b| over our logits (raw float32 file) and the peer's, and max |ours| for scale. */
export function compareLogits(oursPath: string, theirs: Float32Array): { maxAbsDiff: number; maxAbs: number } | null {
  if (!fs.existsSync(oursPath)) return null;
  const b = fs.readFileSync(oursPath);
  const ours = new Float32Array(Uint8Array.from(b).buffer);  // a copy: the Buffer may be unaligned
  if (ours.length !== theirs.length) return { maxAbsDiff: Infinity, maxAbs: NaN };
  let maxAbsDiff = 0, maxAbs = 0;
  for (let i = 0; i < ours.length; i++) {
    maxAbsDiff = Math.max(maxAbsDiff, Math.abs(ours[i] - theirs[i]));
    maxAbs = Math.max(maxAbs, Math.abs(ours[i]));
  }
  return { maxAbsDiff, maxAbs };
}
