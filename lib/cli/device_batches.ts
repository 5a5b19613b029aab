/**
 * Batches for fit() on a device: each batch of a CPU source moved to the device the model trains
 * on, and freed (on the device and the host) as soon as fit() asks for the next one, when its
 * step or validation forward is done.
 */
import type { Device } from '../core/device';
import type { Batch, BatchSource } from '../training/fit';
import type { ViTClassifier } from '../models/vit';
import type { Tensor } from '../core/tensor';

/** A batch of images and their class indices, on the CPU. */
export interface TensorBatch {
  input: Tensor<'float32'>;
  target: Tensor<'int32'>;
}

/** A source of CPU batches that knows its length (batches per pass): the digit batches and DataLoader. */
export type SizedSource = BatchSource<TensorBatch> & { readonly length: number };

/** `source`'s batches on `device` (see the file comment); its length and setEpoch pass through. */
export function deviceBatches(source: SizedSource, device: Device): BatchSource<Batch<ViTClassifier>> & { readonly length: number } {
  return {
    get length() {
      return source.length;
    },
    setEpoch: (epoch) => source.setEpoch?.(epoch),
    async *[Symbol.asyncIterator]() {
      for await (const b of source) {
        const moved = { input: b.input.moveTo(device), target: b.target.moveTo(device) };
        try {
          yield moved;
        } finally {
          moved.input.dispose();
          moved.target.dispose();
        }
      }
    },
  };
}
