/**
 * The hparams plugin's records (tensorboard/plugins/hparams: api.proto, plugin_data.proto), as
 * torch.utils.tensorboard.summary.hparams writes them: an Experiment listing the hyperparameters
 * (with their types) and the metric tags, a SessionStartInfo with the values, and a SessionEndInfo
 * with STATUS_SUCCESS, each an HParamsPluginData (version 0) in the metadata of an empty value.
 */
import { ProtoWriter } from './protobuf';
import { metadataSummary } from './summary';

/** A hyperparameter's value. */
export type HparamValue = number | string | boolean;

const DATA_TYPE = { string: 1, boolean: 2, number: 3 } as const; // DATA_TYPE_STRING, _BOOL, _FLOAT64
const STATUS_SUCCESS = 1;

/** A google.protobuf.Value. */
function value(w: ProtoWriter, v: HparamValue): void {
  if (typeof v === 'number') w.double(2, v);
  else if (typeof v === 'string') w.string(3, v);
  else w.int(4, v);
}

function pluginSummary(tag: string, field: number, build: (w: ProtoWriter) => void): Uint8Array {
  return metadataSummary(`_hparams_/${tag}`, 'hparams', new ProtoWriter().message(field, build).finish());
}

/** The Experiment record: each hyperparameter's name and type, and each metric's tag. */
export function experimentSummary(hparams: Record<string, HparamValue>, metricTags: readonly string[]): Uint8Array {
  return pluginSummary('experiment', 2, (exp) => {
    for (const [name, v] of Object.entries(hparams))
      exp.message(4, (info) => info.string(1, name).int(4, DATA_TYPE[typeof v as keyof typeof DATA_TYPE]));
    for (const tag of metricTags) exp.message(5, (info) => info.message(1, (n) => n.string(2, tag)));
  });
}

/** The SessionStartInfo record: the hyperparameters' values (a map<string, Value>). */
export function sessionStartSummary(hparams: Record<string, HparamValue>): Uint8Array {
  return pluginSummary('session_start_info', 3, (ssi) => {
    for (const [name, v] of Object.entries(hparams)) ssi.message(1, (entry) => entry.string(1, name).message(2, (w) => value(w, v)));
  });
}

/** The SessionEndInfo record: STATUS_SUCCESS. */
export function sessionEndSummary(): Uint8Array {
  return pluginSummary('session_end_info', 4, (sei) => sei.int(1, STATUS_SUCCESS));
}
