/**
 * Hugging Face transformers' ViT (ViTModel, ViTForImageClassification) from the files
 * save_pretrained writes: config.json and model.safetensors. Separate query/key/value become one
 * qkv, layernorm_before/after the blocks' norm1/norm2, and the LayerNorm eps is the config's
 * (1e-12 by default). Loading is strict.
 */
import { Pooler } from '../layers/pooler';
import { ViTClassifier, ViTEncoder, type ViTClassifierConfig } from '../models/vit';
import { Tensor } from '../core/tensor';
import {
  checkArchitecture, disposeRecords, hfActivation, hfDropouts, hfInt, joinQkv, readHfFolder, renameKeys, type HfPretrained, type RenameRule,
} from './hf_files';
import { loadStrict } from './strict';

const P = '^(?:vit\\.)?';
const LAYER = `${P}encoder\\.layer\\.(\\d+)\\.`;
const WB = '(weight|bias)$';

/** Checkpoint names → this library's (ViTClassifier's, plus pooler.* for ViTModel's pooler). */
export const HF_VIT_RULES: readonly RenameRule[] = [
  [new RegExp(`${P}embeddings\\.cls_token$`), 'cls_token'],
  [new RegExp(`${P}embeddings\\.position_embeddings$`), 'pos_embed'],
  [new RegExp(`${P}embeddings\\.patch_embeddings\\.projection\\.${WB}`), 'patch_embed.proj.$1'],
  [new RegExp(`${LAYER}layernorm_before\\.${WB}`), 'blocks.$1.norm1.$2'],
  [new RegExp(`${LAYER}attention\\.attention\\.query\\.${WB}`), 'blocks.$1.attn.q.$2'],
  [new RegExp(`${LAYER}attention\\.attention\\.key\\.${WB}`), 'blocks.$1.attn.k.$2'],
  [new RegExp(`${LAYER}attention\\.attention\\.value\\.${WB}`), 'blocks.$1.attn.v.$2'],
  [new RegExp(`${LAYER}attention\\.output\\.dense\\.${WB}`), 'blocks.$1.attn.proj.$2'],
  [new RegExp(`${LAYER}layernorm_after\\.${WB}`), 'blocks.$1.norm2.$2'],
  [new RegExp(`${LAYER}intermediate\\.dense\\.${WB}`), 'blocks.$1.mlp.fc1.$2'],
  [new RegExp(`${LAYER}output\\.dense\\.${WB}`), 'blocks.$1.mlp.fc2.$2'],
  [new RegExp(`${P}layernorm\\.${WB}`), 'norm.$1'],
  [new RegExp(`${P}pooler\\.dense\\.${WB}`), 'pooler.dense.$1'],
  [/^classifier\.(weight|bias)$/, 'head.$1'],
];

/** Where transformers' ViT drops out: embeddings and branch outputs (hidden), attention weights; not the MLP's hidden layer. */
function vitDropouts(config: Record<string, unknown>) {
  const { hidden, attention } = hfDropouts(config);
  return { embedDropout: hidden, projDropout: hidden, attnDropout: attention, hiddenDropout: 0 };
}

/** The ViTClassifier config of a transformers ViTConfig (config.json). */
export function hfViTConfig(config: Record<string, unknown>): ViTClassifierConfig {
  const size = config.image_size ?? 224;
  const labels = config.id2label as Record<string, string> | undefined;
  return {
    imgSize: Array.isArray(size) ? [size[0], size[1]] : hfInt(config, 'image_size', 224),
    patchSize: hfInt(config, 'patch_size', 16), inChannels: hfInt(config, 'num_channels', 3),
    dModel: hfInt(config, 'hidden_size', 768), depth: hfInt(config, 'num_hidden_layers', 12),
    numHeads: hfInt(config, 'num_attention_heads', 12), dFF: hfInt(config, 'intermediate_size', 3072),
    eps: (config.layer_norm_eps ?? 1e-12) as number, activation: hfActivation(config.hidden_act ?? 'gelu'),
    ...vitDropouts(config), qkvBias: (config.qkv_bias ?? true) as boolean,
    numClasses: labels ? Object.keys(labels).length : hfInt(config, 'num_labels', 2),
  };
}

/** The renamed, qkv-joined weights of a read folder; `use` gets them, then every tensor is freed. */
function withRecord<T>(files: HfPretrained, use: (record: Record<string, Tensor>) => T): T {
  const renamed = renameKeys(files.weights, HF_VIT_RULES, 'a transformers ViT checkpoint');
  const record = joinQkv(renamed);
  try {
    return use(record);
  } finally {
    disposeRecords(files.weights, record);
  }
}

/** A ViTClassifier from a ViTForImageClassification save_pretrained folder. */
export function loadHfViTClassifier(folder: string): ViTClassifier {
  const files = readHfFolder(folder);
  checkArchitecture(files.config, 'ViTForImageClassification');
  return withRecord(files, (record) => loadStrict(new ViTClassifier(hfViTConfig(files.config)), record));
}

/** A ViTModel: the encoder (its output is last_hidden_state) and, when the checkpoint has one, the pooler (pooler_output). */
export interface HfViTModel {
  encoder: ViTEncoder;
  pooler: Pooler | null;
}

/** The encoder and pooler of a ViTModel save_pretrained folder. */
export function loadHfViTModel(folder: string): HfViTModel {
  const files = readHfFolder(folder);
  checkArchitecture(files.config, 'ViTModel');
  const { numClasses: _, ...config } = hfViTConfig(files.config);
  return withRecord(files, (record) => {
    const own: Record<string, Tensor> = {}, pooled: Record<string, Tensor> = {};
    for (const [k, t] of Object.entries(record)) {
      if (k.startsWith('pooler.')) pooled[k.slice('pooler.'.length)] = t;
      else own[k] = t;
    }
    const encoder = loadStrict(new ViTEncoder(config), own);
    if (Object.keys(pooled).length === 0) return { encoder, pooler: null };
    try {
      return { encoder, pooler: loadStrict(new Pooler({ dModel: config.dModel! }), pooled) };
    } catch (e) {
      encoder.dispose();
      throw e;
    }
  });
}
