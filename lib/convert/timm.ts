/**
 * timm's VisionTransformer checkpoints: the config from timm's own argument names, a strict load
 * of its state dict (parameter names are the same), and optionally a new image size with the
 * position table resampled as timm does.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

import { invalidArg } from '../validation/errors';
import { ACTIVATIONS, type Activation } from '../layers/feedforward';
import { imageHW, type ImageSize } from '../layers/patch_embedding';
import type { StateDict } from '../core/module';
import { OptionKeys, type KeySpec } from '../validation/options';
import { loadSafetensors } from '../io/safetensors';
import { Tensor } from '../core/tensor';
import { ViTClassifier, type GlobalPool, type ViTClassifierConfig } from '../models/vit';
import { loadStrict } from './strict';
import { resamplePosEmbed } from './resample';

/** timm VisionTransformer's keyword arguments (those this library can build; `attn_head_dim` is timm's Attention's). */
export interface TimmViTArgs {
  img_size?: number | [number, number];
  patch_size?: number;
  in_chans?: number;
  num_classes?: number;
  global_pool?: GlobalPool;
  embed_dim?: number;
  depth?: number;
  num_heads?: number;
  mlp_ratio?: number;
  qkv_bias?: boolean;
  qk_norm?: false;
  proj_bias?: boolean;
  init_values?: number | null;
  class_token?: boolean;
  pos_embed?: 'learn';
  no_embed_class?: boolean;
  reg_tokens?: 0;
  pre_norm?: false;
  final_norm?: boolean;
  fc_norm?: boolean | null;
  pool_include_prefix?: false;
  dynamic_img_size?: false;
  drop_rate?: 0;
  pos_drop_rate?: number;
  patch_drop_rate?: 0;
  proj_drop_rate?: number;
  attn_drop_rate?: number;
  drop_path_rate?: number;
  weight_init?: string;
  fix_init?: boolean;
  act_layer?: Activation | null;
  attn_head_dim?: number | null;
}

const TIMM_KEYS: KeySpec<TimmViTArgs> = {
  img_size: true, patch_size: true, in_chans: true, num_classes: true, global_pool: true, embed_dim: true, depth: true, num_heads: true,
  mlp_ratio: true, qkv_bias: true, qk_norm: true, proj_bias: true, init_values: true, class_token: true, pos_embed: true,
  no_embed_class: true, reg_tokens: true, pre_norm: true, final_norm: true, fc_norm: true, pool_include_prefix: true,
  dynamic_img_size: true, drop_rate: true, pos_drop_rate: true, patch_drop_rate: true, proj_drop_rate: true, attn_drop_rate: true,
  drop_path_rate: true, weight_init: true, fix_init: true, act_layer: true, attn_head_dim: true,
};
const TIMM_ARGS = new OptionKeys<TimmViTArgs>('timm VisionTransformer arguments', TIMM_KEYS);

/** Arguments whose other values build a model this library does not have (the value it needs, as timm's default). */
const FIXED: [keyof TimmViTArgs, unknown][] = [['qk_norm', false], ['pos_embed', 'learn'], ['reg_tokens', 0], ['pre_norm', false],
  ['pool_include_prefix', false], ['dynamic_img_size', false], ['patch_drop_rate', 0], ['drop_rate', 0]];

export interface FromTimmOptions {
  /** Build the model for this image size instead of img_size, resampling pos_embed (timm's resample_abs_pos_embed). */
  imgSize?: ImageSize;
  /** The resampling's antialias (default true, as timm's checkpoint_filter_fn). */
  antialias?: boolean;
}
const FROM_TIMM_OPTIONS = new OptionKeys<FromTimmOptions>('fromTimm options', { imgSize: true, antialias: true });

/**
 * The ViTClassifier config of timm's VisionTransformer(**args): timm's defaults (img_size 224,
 * patch 16, embed_dim 768, depth 12, 12 heads, mlp_ratio 4, qkv_bias true, LayerNorm eps 1e-6,
 * global_pool 'token', fc_norm when global_pool is 'avg') and its names mapped to this library's.
 * Accepts the args themselves or a timm config.json that holds them under `model_args`. Dropout
 * goes where timm puts it (attn_drop_rate, proj_drop_rate, pos_drop_rate, drop_path_rate).
 * Variants the library cannot build (qk_norm, register tokens, pre_norm, head dropout drop_rate,
 * ...) are an ERR_NF_INVALID_ARG naming the argument.
 */
export function timmViTConfig(timmConfig: TimmViTArgs | { model_args: TimmViTArgs }): ViTClassifierConfig {
  const raw = timmConfig !== null && typeof timmConfig === 'object' && 'model_args' in timmConfig ? timmConfig.model_args : timmConfig;
  const a = TIMM_ARGS.check('timmConfig', raw as TimmViTArgs);
  for (const [key, value] of FIXED)
    if (a[key] !== undefined && a[key] !== value) invalidArg(`timmConfig.${key}`, `${JSON.stringify(value)} (the only value supported)`, a[key]);
  const dModel = a.embed_dim ?? 768;
  const activation = a.act_layer ?? 'gelu';
  if (!ACTIVATIONS.includes(activation)) invalidArg('timmConfig.act_layer', ACTIVATIONS.map((x) => `'${x}'`).join(' | '), activation);
  if ((a.num_classes ?? 1000) < 1) invalidArg('timmConfig.num_classes', 'at least 1 (a ViTClassifier has a head)', a.num_classes);
  const config: ViTClassifierConfig = {
    imgSize: a.img_size ?? 224, patchSize: a.patch_size ?? 16, inChannels: a.in_chans ?? 3, numClasses: a.num_classes ?? 1000,
    dModel, depth: a.depth ?? 12, numHeads: a.num_heads ?? 12, dFF: Math.floor(dModel * (a.mlp_ratio ?? 4)),
    eps: 1e-6, activation, attnDropout: a.attn_drop_rate ?? 0, projDropout: a.proj_drop_rate ?? 0, hiddenDropout: a.proj_drop_rate ?? 0,
    embedDropout: a.pos_drop_rate ?? 0, dropPath: a.drop_path_rate ?? 0, qkvBias: a.qkv_bias ?? true, projBias: a.proj_bias ?? true,
    mlpBias: a.proj_bias ?? true, initValues: a.init_values ?? 0, classToken: a.class_token ?? true,
    noEmbedClass: a.no_embed_class ?? false, finalNorm: a.final_norm ?? true, globalPool: a.global_pool ?? 'token',
  };
  if (a.fc_norm !== undefined && a.fc_norm !== null) config.fcNorm = a.fc_norm;
  if (a.attn_head_dim !== undefined && a.attn_head_dim !== null) config.headDim = a.attn_head_dim;
  return config;
}

/**
 * A ViTClassifier from a timm VisionTransformer state dict and its arguments (see timmViTConfig),
 * loaded strictly: every parameter present with its shape, nothing extra. With options.imgSize the
 * model is built for that size and pos_embed is resampled to its grid first.
 */
export function fromTimm(stateDict: StateDict, timmConfig: TimmViTArgs | { model_args: TimmViTArgs }, options: FromTimmOptions = {}): ViTClassifier {
  const config = timmViTConfig(timmConfig);
  const o = FROM_TIMM_OPTIONS.check('options', options);
  let record = stateDict;
  let resampled: Tensor<'float32'> | null = null;
  if (o.imgSize !== undefined) {
    const patch = config.patchSize!, prefix = config.classToken && !config.noEmbedClass ? 1 : 0;
    const [oh, ow] = imageHW('timmConfig.img_size', config.imgSize), [nh, nw] = imageHW('options.imgSize', o.imgSize);
    const pos = stateDict.pos_embed;
    if (!(pos instanceof Tensor)) invalidArg('stateDict.pos_embed', 'a float32 Tensor [1, tokens, D]', pos);
    resampled = resamplePosEmbed(pos, { oldSize: [oh / patch, ow / patch], newSize: [nh / patch, nw / patch], numPrefixTokens: prefix,
      antialias: o.antialias });
    record = { ...stateDict, pos_embed: resampled };
    config.imgSize = o.imgSize;
  }
  try {
    return loadStrict(new ViTClassifier(config), record);
  } finally {
    resampled?.dispose();
  }
}

/**
 * fromTimm on a folder holding timm's files: model.safetensors and config.json (the arguments
 * under `model_args`, as timm's push_to_hf_hub writes them for a model built with arguments).
 */
export function loadTimm(folder: string, options: FromTimmOptions = {}): ViTClassifier {
  const config = JSON.parse(fs.readFileSync(path.join(folder, 'config.json'), 'utf8')) as { model_args?: TimmViTArgs };
  if (config.model_args === undefined) invalidArg('folder', 'a timm folder whose config.json holds model_args', folder);
  const weights = loadSafetensors(path.join(folder, 'model.safetensors'));
  try {
    return fromTimm(weights, config.model_args, options);
  } finally {
    for (const t of Object.values(weights)) t.dispose();
  }
}
