/**
 * nodeformer: a Transformer engine for Node.js — modules that run forward and backward in native
 * (AVX2/AVX-512) kernels, losses, optimizers, schedules and safetensors checkpoints.
 */
export { native } from './native';
export type { NativeBinding } from './native';
export type { Isa } from './native/core';

export { NodeformerError } from './errors';
export type { ErrorCode } from './errors';
export { Tensor } from './tensor';
export type { DType } from './tensor';
export { Module, Parameter } from './module';
export type { StateDict } from './module';

export { Linear } from './layers/linear';
export type { LinearConfig } from './layers/linear';
export { LayerNorm } from './layers/layernorm';
export type { LayerNormConfig } from './layers/layernorm';
export { MultiHeadAttention } from './layers/attention';
export type { AttentionOptions, MultiHeadAttentionConfig } from './layers/attention';
export { FeedForward } from './layers/feedforward';
export type { Activation, FeedForwardConfig } from './layers/feedforward';
export { PatchEmbedding } from './layers/patch_embedding';
export type { PatchEmbeddingConfig } from './layers/patch_embedding';
export { DecoderBlock, EncoderBlock } from './layers/blocks';
export type { BlockConfig, DecoderBlockOptions, EncoderBlockOptions } from './layers/blocks';
export { patchify, unpatchify, ViTClassifier, ViTDecoder, ViTEncoder } from './models/vit';
export type { ViTClassifierConfig, ViTConfig, ViTDecoderOptions } from './models/vit';
export { Decoder, Encoder, paddingMask, Transformer } from './models/seq2seq';
export type { DecoderOptions, SequenceConfig, TokenModelConfig, TransformerConfig } from './models/seq2seq';

export { crossEntropy, mse } from './losses';
export { AdamW, clipGradNorm, SGD } from './optim';
export type { AdamWOptions, OptimizerState, SGDOptions } from './optim';
export { cosineWithWarmup, inverseSqrtWarmup } from './schedule';
export type { Schedule } from './schedule';
export { loadSafetensors, parseSafetensors, readSafetensorsMetadata, saveSafetensors, serializeSafetensors } from './safetensors';
export { loadModel, saveModel } from './persist';
export type { ConfiguredModule, ModelClass } from './persist';
export { fromTorchTransformer, TORCH_TO_PROJECT } from './convert';
