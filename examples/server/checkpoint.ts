/**
 * ViTClassifier checkpoints: the library's saveModel format (a safetensors file whose metadata
 * holds {module: 'ViTClassifier', config: JSON of the config}), as `nodeformer train` writes them.
 */
import { saveModel, ViTClassifier } from '../../lib/index';

/** Writes the model's weights and its config. */
export function saveClassifier(path: string, model: ViTClassifier): void {
  saveModel(path, model);
}

/** Builds the model the checkpoint describes and loads its weights (strict), in eval mode. */
export function loadClassifier(path: string): ViTClassifier {
  return ViTClassifier.load(path).eval();
}
