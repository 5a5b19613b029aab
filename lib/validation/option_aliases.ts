/**
 * The names other libraries give to this library's options and config keys (PyTorch, timm, Hugging
 * Face transformers, Keras), so that `new AdamW(params, { learningRate })` or `{ nhead: 8 }` is
 * answered with "did you mean 'lr'?" / "did you mean 'numHeads'?". Each row is one of our keys and
 * the names it is known by elsewhere; lookups ignore case and underscores, so snake_case spellings
 * of our own keys (weight_decay, d_model, warmup_steps) need no row.
 */
const KNOWN_AS: Readonly<Record<string, readonly string[]>> = {
  lr: ['learningRate', 'learning_rate', 'rate', 'stepSize'],
  minLr: ['eta_min', 'lrMin', 'final_lr', 'end_lr'],
  weightDecay: ['wd', 'decay', 'l2'],
  betas: ['beta', 'beta1', 'beta2', 'beta_1', 'beta_2', 'adamBetas', 'adam_betas'],
  eps: ['epsilon', 'layer_norm_eps', 'layerNormEps', 'norm_eps', 'adam_epsilon', 'adamEps'],
  momentum: ['mom'],
  numHeads: ['nhead', 'nHead', 'n_head', 'heads', 'num_attention_heads', 'nHeads'],
  dModel: ['hidden_size', 'embed_dim', 'embedDim', 'dim', 'width', 'n_embd', 'd_embed', 'hiddenDim', 'hidden_dim', 'embed_size'],
  dFF: ['dim_feedforward', 'intermediate_size', 'mlp_dim', 'ffn_dim', 'd_inner', 'n_inner', 'mlpHiddenDim', 'mlp_hidden_dim', 'hidden_features'],
  depth: ['num_layers', 'nLayers', 'n_layer', 'num_hidden_layers', 'layers', 'num_blocks', 'numEncoderLayers', 'num_encoder_layers'],
  headDim: ['head_size', 'd_head', 'd_k', 'kv_channels'],
  imgSize: ['image_size', 'img_size', 'resolution', 'input_size'],
  imageSize: ['img_size', 'resolution', 'input_size', 'size'],
  patchSize: ['patch', 'patch_size'],
  inChannels: ['in_chans', 'num_channels', 'channels', 'in_channels'],
  numClasses: ['num_classes', 'n_classes', 'classes', 'num_labels', 'outputs'],
  vocabSize: ['vocab_size', 'n_vocab', 'ntoken', 'ntokens', 'vocab'],
  maxLen: ['max_length', 'maxLength', 'max_seq_len', 'maxSeqLen', 'max_position_embeddings', 'block_size', 'n_positions', 'seq_len', 'context_length'],
  dropout: ['dropout_rate', 'dropoutRate', 'drop_rate', 'hidden_dropout_prob', 'p', 'pDrop'],
  attnDropout: ['attn_drop', 'attn_drop_rate', 'attention_dropout', 'attention_probs_dropout_prob', 'attn_pdrop'],
  projDropout: ['proj_drop', 'proj_drop_rate', 'resid_pdrop'],
  dropPath: ['drop_path_rate', 'stochastic_depth', 'stochasticDepth', 'drop_path'],
  normFirst: ['norm_first', 'pre_norm', 'preNorm', 'prenorm'],
  initValues: ['init_values', 'ls_init_value', 'layer_scale_init_value', 'layerScale'],
  globalPool: ['global_pool', 'pool', 'pooling'],
  activation: ['act_layer', 'hidden_act', 'act', 'activation_fn', 'nonlinearity'],
  causal: ['is_causal', 'isCausal'],
  attnMask: ['attn_mask', 'mask', 'attention_mask'],
  keyPaddingMask: ['key_padding_mask', 'src_key_padding_mask', 'padding_mask', 'paddingMask'],
  labelSmoothing: ['label_smoothing', 'smoothing'],
  ignoreIndex: ['ignore_index'],
  cudaGraphs: ['cuda_graph', 'cuda_graphs', 'cudaGraph', 'use_cuda_graph', 'useCudaGraph', 'enable_cuda_graph'],
  maxGradNorm: ['max_grad_norm', 'max_norm', 'clip_grad_norm', 'clipGradNorm', 'gradient_clip_val', 'clipnorm', 'gradClip'],
  epochs: ['num_epochs', 'numEpochs', 'n_epochs', 'max_epochs', 'maxEpochs', 'num_train_epochs'],
  warmupSteps: ['warmup', 'num_warmup_steps', 'warmup_iters'],
  totalSteps: ['num_training_steps', 'max_steps', 'maxSteps', 'total_iters', 'T_max', 'steps'],
  batchSize: ['batch_size', 'bs', 'per_device_train_batch_size'],
  workers: ['num_workers', 'numWorkers', 'threads'],
  dropLast: ['drop_last', 'drop_remainder'],
  validation: ['validation_data', 'val', 'valData', 'eval_dataset', 'validationData', 'val_loader'],
  callbacks: ['callback'],
  seed: ['random_state', 'randomSeed', 'random_seed', 'rngSeed'],
};

/** A name as lookups compare it: lower case, no underscores or hyphens. */
export function foldName(name: string): string {
  return name.toLowerCase().replace(/[_-]/g, '');
}

const BY_ALIAS = new Map<string, string[]>();
for (const [key, aliases] of Object.entries(KNOWN_AS))
  for (const alias of [key, ...aliases]) BY_ALIAS.set(foldName(alias), [...(BY_ALIAS.get(foldName(alias)) ?? []), key]);

/**
 * The allowed key that `name` spells another way: the same key in another case or snake_case
 * (weight_decay → weightDecay), or a key another library calls `name` (learningRate → lr); null
 * when none of `allowed` is.
 */
export function aliasOf(name: string, allowed: readonly string[]): string | null {
  const folded = foldName(name);
  return allowed.find((a) => foldName(a) === folded) ?? allowed.find((a) => BY_ALIAS.get(folded)?.includes(a)) ?? null;
}
