/** Messages between the HTTP thread (app.ts) and the inference worker (worker.ts). */

/** What the worker needs to start. */
export interface WorkerInit {
  checkpoint: string;
}

/** The loaded model, as /health reports it. */
export interface ModelInfo {
  imgSize: number;
  inChannels: number;
  numClasses: number;
  parameters: number;
}

/** One posted image: the raw PNG bytes. */
export interface PredictItem {
  id: number;
  png: Uint8Array;
}

/** A classified image. */
export interface Prediction {
  id: number;
  label: number;
  probabilities: number[];
}

/** An image the worker refused (bad PNG): answered with this status and error. */
export interface Refusal {
  id: number;
  status: number;
  code: string;
  message: string;
}

export type ToWorker = { type: 'predict'; items: PredictItem[] };

export type FromWorker =
  | { type: 'ready'; model: ModelInfo }
  | { type: 'results'; results: (Prediction | Refusal)[] };
