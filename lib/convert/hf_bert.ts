/**
 * Hugging Face transformers' BertModel from the files save_pretrained writes (config.json and
 * model.safetensors), into this library's BertModel: query/key/value joined into qkv, the
 * post-LN blocks' attention.output.LayerNorm and output.LayerNorm as norm1 and norm2. Loading is
 * strict. Only absolute position embeddings exist here.
 */
import { invalidArg } from '../validation/errors';
import { BertModel, type BertConfig } from '../models/bert';
import {
  checkArchitecture, disposeRecords, hfActivation, hfDropouts, hfInt, joinQkv, readHfFolder, renameKeys, type RenameRule,
} from './hf_files';
import { loadStrict } from './strict';

const P = '^(?:bert\\.)?';
const LAYER = `${P}encoder\\.layer\\.(\\d+)\\.`;
const WB = '(weight|bias)$';

/** Checkpoint names → BertModel's. */
export const HF_BERT_RULES: readonly RenameRule[] = [
  [new RegExp(`${P}embeddings\\.word_embeddings\\.weight$`), 'word_embeddings'],
  [new RegExp(`${P}embeddings\\.position_embeddings\\.weight$`), 'position_embeddings'],
  [new RegExp(`${P}embeddings\\.token_type_embeddings\\.weight$`), 'token_type_embeddings'],
  [new RegExp(`${P}embeddings\\.LayerNorm\\.${WB}`), 'embed_norm.$1'],
  [new RegExp(`${LAYER}attention\\.self\\.query\\.${WB}`), 'blocks.$1.attn.q.$2'],
  [new RegExp(`${LAYER}attention\\.self\\.key\\.${WB}`), 'blocks.$1.attn.k.$2'],
  [new RegExp(`${LAYER}attention\\.self\\.value\\.${WB}`), 'blocks.$1.attn.v.$2'],
  [new RegExp(`${LAYER}attention\\.output\\.dense\\.${WB}`), 'blocks.$1.attn.proj.$2'],
  [new RegExp(`${LAYER}attention\\.output\\.LayerNorm\\.${WB}`), 'blocks.$1.norm1.$2'],
  [new RegExp(`${LAYER}intermediate\\.dense\\.${WB}`), 'blocks.$1.mlp.fc1.$2'],
  [new RegExp(`${LAYER}output\\.dense\\.${WB}`), 'blocks.$1.mlp.fc2.$2'],
  [new RegExp(`${LAYER}output\\.LayerNorm\\.${WB}`), 'blocks.$1.norm2.$2'],
  [new RegExp(`${P}pooler\\.dense\\.${WB}`), 'pooler.dense.$1'],
];

/** The BertModel config of a transformers BertConfig (config.json); `pooler` as the checkpoint has one. */
export function hfBertConfig(config: Record<string, unknown>, pooler = true): BertConfig {
  const positions = config.position_embedding_type ?? 'absolute';
  if (positions !== 'absolute') invalidArg('config.position_embedding_type', "'absolute'", positions);
  return {
    vocabSize: hfInt(config, 'vocab_size', 30522), dModel: hfInt(config, 'hidden_size', 768),
    numHeads: hfInt(config, 'num_attention_heads', 12), dFF: hfInt(config, 'intermediate_size', 3072),
    depth: hfInt(config, 'num_hidden_layers', 12), maxPositions: hfInt(config, 'max_position_embeddings', 512),
    typeVocabSize: hfInt(config, 'type_vocab_size', 2), padIdx: config.pad_token_id === null ? null : hfInt(config, 'pad_token_id', 0), eps: (config.layer_norm_eps ?? 1e-12) as number,
    activation: hfActivation(config.hidden_act ?? 'gelu'), dropout: hfDropouts(config).hidden, attnDropout: hfDropouts(config).attention, pooler,
  };
}

/** A BertModel from a BertModel save_pretrained folder (with the pooler when the checkpoint has one). */
export function loadHfBert(folder: string): BertModel {
  const files = readHfFolder(folder);
  checkArchitecture(files.config, 'BertModel');
  const record = joinQkv(renameKeys(files.weights, HF_BERT_RULES, 'a transformers BertModel checkpoint'));
  try {
    return loadStrict(new BertModel(hfBertConfig(files.config, 'pooler.dense.weight' in record)), record);
  } finally {
    disposeRecords(files.weights, record);
  }
}
