/**
 * nodeformer: a Transformer engine for Node.js — modules that run forward and backward in native
 * (AVX2/AVX-512) kernels, losses, optimizers, schedules and safetensors checkpoints.
 */
export { native, nativeAddonPath } from './native/addon';
export type { NativeBinding } from './native/addon';
export type { Isa, IsaInfo, IsaRejection } from './native/core';

export { NodeformerError } from './validation/errors';
export { assertFinite, checkFiniteEnabled, setCheckFinite } from './core/finite';
export type { ErrorCode } from './validation/errors';
export { Tensor } from './core/tensor';
export type { DType } from './core/tensor';
export { cudaEmptyCache, cudaMemoryStats, supportedOps, supports, supportsBf16 } from './core/device';
export { cudaGraphsEnabled, cudaGraphStats, setCudaGraphs } from './core/graph';
export type { CudaGraphStats } from './core/graph';
export type { CudaBinding, CudaGemmInfo, CudaMemoryStats, Device, DeviceBuffer, PlacementConfig, Precision } from './core/device';
export { Module, Parameter } from './core/module';
export type { EvalOptions, LoadStateDictOptions, ProgramArgs, ProgramResult, StateDict } from './core/module';
export { op, runAsync, runSync } from './core/program';
export type { OpArgs, OpName, OpRequest, Program } from './core/program';
export { Scope } from './core/scope';
export { setWeightPrepacking, weightPrepacking } from './core/prepack';

export { Linear } from './layers/linear';
export type { LinearConfig } from './layers/linear';
export { LayerNorm } from './layers/layernorm';
export type { LayerNormConfig } from './layers/layernorm';
export { MultiHeadAttention } from './layers/attention';
export type { AttentionOptions, AttentionWithWeights, MultiHeadAttentionConfig } from './layers/attention';
export { FeedForward } from './layers/feedforward';
export type { Activation, FeedForwardConfig } from './layers/feedforward';
export { PatchEmbedding } from './layers/patch_embedding';
export type { ImageSize, PatchEmbeddingConfig } from './layers/patch_embedding';
export { LayerScale } from './layers/layer_scale';
export type { LayerScaleConfig } from './layers/layer_scale';
export { Pooler } from './layers/pooler';
export type { PoolerConfig } from './layers/pooler';
export { DecoderBlock, EncoderBlock } from './layers/blocks';
export type { BlockConfig, DecoderBlockOptions, EncoderBlockOptions } from './layers/blocks';
export { patchify, unpatchify, ViTClassifier, ViTDecoder, ViTEncoder } from './models/vit';
export type { GlobalPool, ViTClassifierConfig, ViTConfig, ViTDecoderConfig, ViTDecoderOptions, ViTForwardOptions } from './models/vit';
export { BertModel } from './models/bert';
export type { BertConfig, BertInputs, BertOutput } from './models/bert';
export { Decoder, Encoder, paddingMask, Transformer } from './models/seq2seq';
export type {
  DecoderOptions, EncoderOptions, GenerateOptions, SequenceConfig, TokenModelConfig, TransformerConfig,
} from './models/seq2seq';

export { crossEntropy, crossEntropyOps, mse, mseOps } from './training/losses';
export {
  argmax, argmaxAsync, argmaxOps, logSoftmax, logSoftmaxAsync, logSoftmaxOps, softmax, softmaxAsync, softmaxOps, topk, topkAsync,
  topkOps,
} from './generation/logits';
export type { TopK } from './generation/logits';
export type { CrossEntropyOptions, LossResult, MseOptions } from './training/losses';
export { AdamW, clipGradNorm, clipGradNormOps, Optimizer, SGD } from './training/optim';
export type { AdamWOptions, OptimizerState, ParamGroup, SGDOptions } from './training/optim';
export { paramGroups } from './training/param_groups';
export type { ParamGroupsOptions } from './training/param_groups';
export { trainStep, trainStepAsync, trainStepOps } from './training/train';
export type { LossFn, TrainInputs, TrainStepOptions } from './training/train';
export { cosineWithWarmup, inverseSqrtWarmup, scheduleFromConfig } from './training/schedule';
export type { CosineWithWarmupOptions, InverseSqrtWarmupOptions, Schedule, ScheduleConfig } from './training/schedule';
export {
  loadSafetensors, loadSafetensorsAsync, parseSafetensors, readSafetensorsMetadata, saveSafetensors, serializeSafetensors,
} from './io/safetensors';
export {
  loadCheckpoint, loadCheckpointAsync, parseCheckpoint, resume, resumeAsync, saveCheckpoint, saveCheckpointAsync,
} from './training/checkpoint';
export type { Checkpoint, CheckpointState, RandomState, ResumeResult, ResumeTarget } from './training/checkpoint';
export { loadModel, saveModel } from './io/persist';
export type { ConfiguredModule, ModelClass } from './io/persist';
export { fromTorchTransformer, TORCH_TO_PROJECT } from './convert/torch';
export { fromTimm, loadTimm, timmViTConfig } from './convert/timm';
export type { FromTimmOptions, TimmViTArgs } from './convert/timm';
export { resamplePosEmbed } from './convert/resample';
export type { ResamplePosEmbedOptions } from './convert/resample';
export { HF_VIT_RULES, hfViTConfig, loadHfViTClassifier, loadHfViTModel } from './convert/hf_vit';
export type { HfViTModel } from './convert/hf_vit';
export { HF_BERT_RULES, hfBertConfig, loadHfBert } from './convert/hf_bert';
export { renameKeys } from './convert/hf_files';
export type { RenameRule } from './convert/hf_files';

export * as distributed from './distributed';
export type { InitOptions, ReduceOp } from './distributed/collectives';
export { DistributedSampler } from './distributed/sampler';
export type { DistributedSamplerOptions } from './distributed/sampler';
export { DistributedDataParallel } from './distributed/ddp';
export type { DdpStats, DistributedDataParallelOptions } from './distributed/ddp';

export { SummaryWriter } from './io/tensorboard';
export type { AddHparamsOptions, HistogramValues, HparamValue, SummaryWriterOptions } from './io/tensorboard';
export { fit } from './training/fit';
export type { Batch, BatchSource, FitOptions } from './training/fit';
export { earlyStopping, modelCheckpoint, progressBar, tensorBoard } from './training/callbacks';
export type {
  BatchLogs, Callback, EarlyStoppingOptions, EpochLogs, FitContext, ModelCheckpointOptions, MonitorKey, MonitorMode,
  ProgressBarOptions, TensorBoardOptions,
} from './training/callbacks';
export { ImageFolder, IMAGE_EXTENSIONS } from './data/image_folder';
export type { ImageFolderOptions, ImageSample } from './data/image_folder';
export { DataLoader } from './data/loader';
export type { DataLoaderOptions, ImageBatch } from './data/loader';
export { IMAGENET_MEAN, IMAGENET_STD } from './data/transforms';
export type { ImageTransform, TransformOptions } from './data/transforms';
