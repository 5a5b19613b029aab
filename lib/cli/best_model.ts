/**
 * The command line's checkpoint on the best validation score: model.safetensors (saveModel, with
 * the run's metadata) written after each epoch whose validation loss is the lowest so far (the
 * training loss when there is no validation); once training ends, finish() puts those weights back
 * into the model, so that what the run reports and draws is the model in the file.
 */
import { Monitor } from '../training/callbacks/monitor';
import type { Callback } from '../training/callbacks/types';
import { ViTClassifier } from '../models/vit';
import { saveModel } from '../io/persist';

/** The callback, and what it saved. */
export interface BestModel extends Callback {
  /** The epoch whose weights the file holds (0 before one is saved). */
  readonly epoch: number;
  /**
   * After training: loads the file's weights back into the model when later epochs trained past
   * the best one; saves the last weights when no epoch was ever saved (a loss that was NaN throughout).
   */
  finish(): void;
}

/** A callback keeping `model`'s best epoch in `file` with `metadata` (see the file comment). */
export function bestModel(file: string, model: ViTClassifier, metadata: Record<string, string> = {}): BestModel {
  let monitor: Monitor | null = null;
  let best = 0, last = 0;
  return {
    get epoch() {
      return best;
    },
    onTrainBegin(ctx) {
      monitor = new Monitor('bestModel', ctx.hasValidation ? 'valLoss' : 'loss', 'min', 0);
    },
    onEpochEnd(logs) {
      last = logs.epoch;
      if (!monitor!.update(monitor!.value(logs))) return;
      saveModel(file, model, metadata);
      best = logs.epoch;
    },
    finish() {
      if (best === 0) {
        saveModel(file, model, metadata);
        best = last;
      } else if (best !== last) {
        const saved = ViTClassifier.load(file);
        try {
          model.loadStateDict(saved.stateDict());
        } finally {
          saved.dispose();
        }
      }
    },
  };
}
