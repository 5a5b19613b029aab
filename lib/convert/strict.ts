import type { Module, StateDict } from '../core/module';

/** Loads `record` strictly into `model` (a converter's fresh model), which is disposed when that fails; returns the model. */
export function loadStrict<M extends Module>(model: M, record: StateDict): M {
  try {
    model.loadStateDict(record, { strict: true });
    return model;
  } catch (e) {
    model.dispose();
    throw e;
  }
}
