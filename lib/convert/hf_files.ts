/**
 * What Hugging Face transformers' save_pretrained writes (config.json and model.safetensors) and
 * the pieces its converters share: renaming a state dict by rules, joining q/k/v, the activation.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

import { invalidArg, NodeformerError } from '../validation/errors';
import type { Activation } from '../layers/feedforward';
import { loadSafetensors } from '../io/safetensors';
import { Tensor } from '../core/tensor';

/** A save_pretrained folder read: its config.json and its weights (float32 tensors on the cpu, the caller's to dispose). */
export interface HfPretrained {
  config: Record<string, unknown>;
  weights: Record<string, Tensor>;
}

/** Reads config.json and model.safetensors of a save_pretrained folder. */
export function readHfFolder(folder: string): HfPretrained {
  if (typeof folder !== 'string') invalidArg('folder', 'a path to a save_pretrained folder', folder);
  const configPath = path.join(folder, 'config.json'), weightsPath = path.join(folder, 'model.safetensors');
  for (const p of [configPath, weightsPath])
    if (!fs.existsSync(p)) invalidArg('folder', `a save_pretrained folder (config.json and model.safetensors; ${p} is missing)`, folder);
  const config = JSON.parse(fs.readFileSync(configPath, 'utf8')) as Record<string, unknown>;
  return { config, weights: loadSafetensors(weightsPath) };
}

/** A rule: a checkpoint name pattern and the name it becomes ($1... from the pattern's groups). */
export type RenameRule = readonly [RegExp, string];

/**
 * Renames every key of `weights` by the first rule whose pattern matches the whole key; a key no
 * rule matches is an ERR_NF_STATE_DICT naming it (a strict load: nothing in the file is ignored).
 */
export function renameKeys(weights: Record<string, Tensor>, rules: readonly RenameRule[], what: string): Record<string, Tensor> {
  const out: Record<string, Tensor> = {}, unknown: string[] = [];
  for (const [key, t] of Object.entries(weights)) {
    const rule = rules.find(([re]) => re.test(key));
    if (rule) out[key.replace(rule[0], rule[1])] = t;
    else unknown.push(key);
  }
  if (unknown.length) throw new NodeformerError('ERR_NF_STATE_DICT', `${what}: unexpected ${unknown.join(', ')}`);
  return out;
}

/**
 * Joins the renamed `<prefix>.q.<w>`, `.k.`, `.v.` entries (w = weight or bias) into one
 * `<prefix>.qkv.<w>` (rows q, k, v: MultiHeadAttention's layout); the parts are removed.
 */
export function joinQkv(record: Record<string, Tensor>): Record<string, Tensor> {
  const out: Record<string, Tensor> = {};
  for (const [key, t] of Object.entries(record)) {
    const m = /^(.*)\.q\.(weight|bias)$/.exec(key);
    if (!m) {
      if (!/\.(k|v)\.(weight|bias)$/.test(key)) out[key] = t;
      continue;
    }
    const parts = ['q', 'k', 'v'].map((p) => record[`${m[1]}.${p}.${m[2]}`]);
    if (parts.some((p) => p === undefined)) throw new NodeformerError('ERR_NF_STATE_DICT', `missing the key or value of ${key}`);
    const data = new Float32Array(parts.reduce((n, p) => n + p.size, 0));
    let at = 0;
    for (const p of parts) {
      data.set(p.data as Float32Array, at);
      at += p.size;
    }
    out[`${m[1]}.qkv.${m[2]}`] = Tensor.from(data, [3 * parts[0].shape[0], ...parts[0].shape.slice(1)]);
  }
  return out;
}

/** The activation of a transformers config's hidden_act. */
export function hfActivation(name: unknown): Activation {
  switch (name) {
    case 'gelu': return 'gelu';
    case 'gelu_new': case 'gelu_pytorch_tanh': case 'gelu_fast': return 'gelu_tanh';
    case 'relu': return 'relu';
    case 'silu': case 'swish': return 'silu';
    default: return invalidArg('config.hidden_act', "'gelu', 'gelu_new', 'gelu_pytorch_tanh', 'relu' or 'silu'", name);
  }
}

/** transformers' dropout rates: hidden_dropout_prob (the embeddings and each residual branch), attention_probs_dropout_prob. */
export function hfDropouts(config: Record<string, unknown>): { hidden: number; attention: number } {
  return { hidden: (config.hidden_dropout_prob ?? 0) as number, attention: (config.attention_probs_dropout_prob ?? 0) as number };
}

/** A numeric field of a transformers config. */
export function hfInt(config: Record<string, unknown>, key: string, fallback?: number): number {
  const v = config[key] ?? fallback;
  if (!Number.isInteger(v)) invalidArg(`config.${key}`, 'an integer', v);
  return v as number;
}

/** Disposes every tensor of the records (the file's and the joined ones; each once). */
export function disposeRecords(...records: Record<string, Tensor>[]): void {
  const seen = new Set<Tensor>();
  for (const r of records) for (const t of Object.values(r)) if (!seen.has(t)) {
    seen.add(t);
    t.dispose();
  }
}

/** Checks config.json's architecture (when it names one) is `expected`. */
export function checkArchitecture(config: Record<string, unknown>, expected: string): void {
  const arch = (config.architectures as string[] | undefined)?.[0];
  if (arch !== undefined && arch !== expected) invalidArg('folder', `a ${expected} save_pretrained folder`, `one of ${arch}`);
}
