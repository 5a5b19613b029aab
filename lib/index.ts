/**
 * nodeformer: a Transformer engine for Node.js — modules that run forward and backward in native
 * (AVX2/AVX-512) kernels, losses, optimizers, schedules and safetensors checkpoints.
 */
export { native, nativeAddonPath } from './native';
export type { NativeBinding } from './native';
export type { Isa, IsaInfo, IsaRejection } from './native/core';

export { NodeformerError } from './errors';
export { assertFinite, checkFiniteEnabled, setCheckFinite } from './finite';
export type { ErrorCode } from './errors';
export { Tensor } from './tensor';
export type { DType } from './tensor';
export { cudaEmptyCache, cudaMemoryStats, supportedOps, supports } from './device';
export type { CudaBinding, CudaMemoryStats, Device, DeviceBuffer } from './device';
export { Module, Parameter } from './module';
export type { EvalOptions, LoadStateDictOptions, ProgramArgs, ProgramResult, StateDict } from './module';
export { op, runAsync, runSync } from './program';
export type { OpArgs, OpName, OpRequest, Program } from './program';
export { Scope } from './scope';
export { setWeightPrepacking, weightPrepacking } from './prepack';

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

export { crossEntropy, crossEntropyOps, mse, mseOps } from './losses';
export {
  argmax, argmaxAsync, argmaxOps, logSoftmax, logSoftmaxAsync, logSoftmaxOps, softmax, softmaxAsync, softmaxOps, topk, topkAsync,
  topkOps,
} from './logits';
export type { TopK } from './logits';
export type { CrossEntropyOptions, LossResult, MseOptions } from './losses';
export { AdamW, clipGradNorm, clipGradNormOps, Optimizer, SGD } from './optim';
export type { AdamWOptions, OptimizerState, ParamGroup, SGDOptions } from './optim';
export { paramGroups } from './param_groups';
export type { ParamGroupsOptions } from './param_groups';
export { trainStep, trainStepAsync, trainStepOps } from './train';
export type { LossFn, TrainInputs, TrainStepOptions } from './train';
export { cosineWithWarmup, inverseSqrtWarmup, scheduleFromConfig } from './schedule';
export type { CosineWithWarmupOptions, InverseSqrtWarmupOptions, Schedule, ScheduleConfig } from './schedule';
export {
  loadSafetensors, loadSafetensorsAsync, parseSafetensors, readSafetensorsMetadata, saveSafetensors, serializeSafetensors,
} from './safetensors';
export {
  loadCheckpoint, loadCheckpointAsync, parseCheckpoint, resume, resumeAsync, saveCheckpoint, saveCheckpointAsync,
} from './checkpoint';
export type { Checkpoint, CheckpointState, RandomState, ResumeResult, ResumeTarget } from './checkpoint';
export { loadModel, saveModel } from './persist';
export type { ConfiguredModule, ModelClass } from './persist';
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
export type { InitOptions, ReduceOp } from './distributed';
export { DistributedSampler } from './sampler';
export type { DistributedSamplerOptions } from './sampler';
export { DistributedDataParallel } from './ddp';
export type { DdpStats, DistributedDataParallelOptions } from './ddp';

export { SummaryWriter } from './tensorboard';
export type { AddHparamsOptions, HistogramValues, HparamValue, SummaryWriterOptions } from './tensorboard';
export { fit } from './fit';
export type { Batch, BatchSource, FitOptions } from './fit';
export { earlyStopping, modelCheckpoint, progressBar, tensorBoard } from './callbacks';
export type {
  BatchLogs, Callback, EarlyStoppingOptions, EpochLogs, FitContext, ModelCheckpointOptions, MonitorKey, MonitorMode,
  ProgressBarOptions, TensorBoardOptions,
} from './callbacks';
export { ImageFolder, IMAGE_EXTENSIONS } from './data/image_folder';
export type { ImageFolderOptions, ImageSample } from './data/image_folder';
export { DataLoader } from './data/loader';
export type { DataLoaderOptions, ImageBatch } from './data/loader';
export { IMAGENET_MEAN, IMAGENET_STD } from './data/transforms';
export type { ImageTransform, TransformOptions } from './data/transforms';
