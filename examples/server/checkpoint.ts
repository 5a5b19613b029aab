/**
 * ViTClassifier checkpoints: a safetensors file whose metadata holds
 * {module: 'ViTClassifier', config: JSON of the ViTClassifierConfig}. The one place to swap for
 * `ViTClassifier.load(path)` / `model.save(path)` once the library has them.
 */
import { loadSafetensors, NodeformerError, readSafetensorsMetadata, saveSafetensors, ViTClassifier,
  type ViTClassifierConfig } from '../../lib/index';

/** Writes the model's weights and its config. */
export function saveClassifier(path: string, model: ViTClassifier): void {
  const config: ViTClassifierConfig = { ...model.config, numClasses: model.numClasses };
  saveSafetensors(path, model.stateDict(), { module: 'ViTClassifier', config: JSON.stringify(config) });
}

/** Builds the model the checkpoint describes and loads its weights (strict), in eval mode. */
export function loadClassifier(path: string): ViTClassifier {
  const meta = readSafetensorsMetadata(path);
  if (meta.module !== 'ViTClassifier')
    throw new NodeformerError('ERR_NF_FORMAT', `Expected metadata module "ViTClassifier" for ${path} but received ${JSON.stringify(meta.module)}`);
  let config: ViTClassifierConfig;
  try {
    config = JSON.parse(meta.config ?? '');
  } catch {
    throw new NodeformerError('ERR_NF_FORMAT', `Expected a JSON config in the metadata of ${path} but received ${JSON.stringify(meta.config)}`);
  }
  const model = new ViTClassifier(config);
  const weights = loadSafetensors(path);
  try {
    model.loadStateDict(weights);
  } catch (e) {
    model.dispose();
    throw e;
  } finally {
    for (const t of Object.values(weights)) t.dispose();
  }
  return model.eval();
}
