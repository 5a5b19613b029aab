/**
 * nodeformer: a Transformer engine for Node.js. This entry point exports the raw native binding
 * (layer-level ops on typed arrays); the module façade (Tensor, Encoder, ViTClassifier, ...) is
 * built on it.
 */
export { native } from './native';
export type { NativeBinding } from './native';
export type { Isa } from './native/core';
