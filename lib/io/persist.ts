/**
 * Model files: a model's state dict in a safetensors file whose metadata names the module class and
 * holds its config as JSON, so the file alone restores the model. Training checkpoints
 * (lib/training/checkpoint.ts: saveCheckpoint, fit's modelCheckpoint) carry the same two metadata entries
 * beside their weights ("model.<name>"), so loadModel restores a model from either kind of file.
 */
import { invalidArg, NodeformerError } from '../validation/errors';
import { Module, setModelLoader } from '../core/module';
import { entriesToTensors, readSafetensors, saveSafetensors, type RawEntry } from './safetensors';

/** A module that keeps the config it was built from (every module of this library does). */
export type ConfiguredModule = Module & { readonly config: object };

/** A module class whose constructor takes the config that its instances keep. */
export type ModelClass<M extends ConfiguredModule> = { new (config: never): M; readonly name: string };

/** The `format` metadata of a training checkpoint (lib/training/checkpoint.ts), whose weights are named "model.<name>". */
export const CHECKPOINT_FORMAT = 'nodeformer-checkpoint/1';

/**
 * The metadata that makes a file restorable by loadModel: { module: the class name, config: JSON
 * of model.config }; none for a module without a config object.
 */
export function modelMetadata(model: Module): Record<string, string> {
  const config = (model as { config?: unknown }).config;
  if (typeof config !== 'object' || config === null) return {};
  return { module: model.constructor.name, config: JSON.stringify(config) };
}

/**
 * Writes model.stateDict() to `path` (atomically) with the metadata { module: the class name,
 * config: JSON of model.config } and `extra` (e.g. an image classifier's class names; readable with
 * readSafetensorsMetadata). Restore it with loadModel (or ViTClassifier.load).
 */
export function saveModel(path: string, model: ConfiguredModule, extra: Record<string, string> = {}): void {
  const metadata = model instanceof Module ? modelMetadata(model) : {};
  if (metadata.module === undefined) invalidArg('model', 'a Module with a config', model);
  saveSafetensors(path, model.stateDict(), { ...extra, ...metadata });
}

function formatError(path: string, expected: string, received: string): never {
  throw new NodeformerError('ERR_NF_FORMAT', `Expected ${expected} for ${path} but received ${received}`);
}

/** The module classes loadModel can build from a file's metadata alone, by class name. */
const modelClasses = new Map<string, ModelClass<ConfiguredModule>>();

/** Makes `cls` one that loadModel(path) builds when a file's metadata names it (every module class of the library is). */
export function registerModelClass(cls: ModelClass<ConfiguredModule>): void {
  modelClasses.set(cls.name, cls);
}

/**
 * What a file without "module" and "config" metadata is, and the calls that restore a model from it:
 * a training checkpoint of an earlier release (no config stored) or a bare state dict.
 */
function withoutConfig(metadata: Record<string, string>): string {
  return metadata.format === CHECKPOINT_FORMAT
    ? 'a training checkpoint without "module" and "config" metadata (written by an earlier release): build the model ' +
      'with the config it was trained with and restore the checkpoint into it: resume(path, { model })'
    : 'a safetensors file without "module" and "config" metadata (a bare state dict): build the model with its config ' +
      'and load the weights into it: model.loadStateDict(loadSafetensors(path))';
}

/** The class a file's "module" metadata names, or an ERR_NF_FORMAT error saying what is missing. */
function classOf(path: string, metadata: Record<string, string>): ModelClass<ConfiguredModule> {
  const expected = 'a model file written by saveModel, saveCheckpoint or modelCheckpoint (its metadata names the module class)';
  const module = metadata.module;
  if (module === undefined) formatError(path, expected, withoutConfig(metadata));
  const cls = modelClasses.get(module);
  if (!cls)
    formatError(path, expected, `a checkpoint of the unknown class ${JSON.stringify(module)} ` +
      `(nodeformer's classes are ${[...modelClasses.keys()].join(', ')}; for a class of your own, pass it: loadModel(path, ${module}))`);
  return cls;
}

/**
 * Restores a model from a file written by saveModel, saveCheckpoint, fit's modelCheckpoint or the
 * command line: checks that the file was written for `cls` (without `cls`, the class the file's
 * metadata names), builds it from the stored config and loads the weights with a strict state dict
 * (every parameter present, no extra ones, same shapes); a training checkpoint's optimizer state is
 * left out (resume restores it). A file without that metadata, of another module or with an
 * unusable config is an ERR_NF_FORMAT error naming the call that restores it; mismatched weights
 * are ERR_NF_STATE_DICT.
 */
export function loadModel(path: string): ConfiguredModule;
export function loadModel<M extends ConfiguredModule>(path: string, cls: ModelClass<M>): M;
export function loadModel<M extends ConfiguredModule>(path: string, cls?: ModelClass<M>): M {
  if (cls !== undefined && (typeof cls !== 'function' || !((cls as { prototype?: unknown }).prototype instanceof Module)))
    invalidArg('cls', 'a Module class such as ViTClassifier (or nothing: the class the file names)', cls);
  const { entries, metadata } = readSafetensors(path);
  cls ??= classOf(path, metadata) as ModelClass<M>;
  const expected = `a ${cls.name} model file written by saveModel, saveCheckpoint or modelCheckpoint`;
  if (metadata.module === undefined || metadata.config === undefined) formatError(path, expected, withoutConfig(metadata));
  if (metadata.module !== cls.name)
    formatError(path, expected, `a ${metadata.module} model file (loadModel(path) restores it as the ${metadata.module} it is)`);
  let config: unknown;
  try {
    config = JSON.parse(metadata.config);
  } catch (e) {
    formatError(path, expected, `a config that is not JSON (${(e as Error).message})`);
  }
  if (config === null || typeof config !== 'object' || Array.isArray(config)) formatError(path, expected, `the config ${metadata.config}`);
  let model: M;
  try {
    model = new cls(config as never);
  } catch (e) {
    if (!(e instanceof NodeformerError)) throw e;
    formatError(path, expected, `a config the constructor rejects: ${e.message}`);
  }
  const record = entriesToTensors(weightEntries(entries, metadata));
  try {
    model.loadStateDict(record, { strict: true });
  } catch (e) {
    model.dispose();
    throw e;
  } finally {
    for (const t of Object.values(record)) t.dispose();
  }
  return model;
}

setModelLoader((path, cls) => loadModel(path, cls as unknown as ModelClass<ConfiguredModule>));

/** A file's model weights: every entry of a model file; a training checkpoint's "model.<name>" entries, named <name>. */
export function weightEntries(entries: Record<string, RawEntry>, metadata: Record<string, string>): Record<string, RawEntry> {
  if (metadata.format !== CHECKPOINT_FORMAT) return entries;
  return Object.fromEntries(Object.entries(entries).filter(([k]) => k.startsWith('model.')).map(([k, e]) => [k.slice('model.'.length), e]));
}
