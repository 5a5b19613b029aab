/** Checkpoint conversion from torch.nn.Transformer* state dicts to this library's names. */
import { invalidArg } from '../validation/errors';
import type { StateDict } from '../core/module';

/** Substring replacements applied in order, as TORCH_TO_PROJECT in reference/torch_reference.py. */
export const TORCH_TO_PROJECT: readonly (readonly [string, string])[] = [
  ['self_attn.in_proj_weight', 'attn.qkv.weight'],
  ['self_attn.in_proj_bias', 'attn.qkv.bias'],
  ['self_attn.out_proj.', 'attn.proj.'],
  ['multihead_attn.in_proj_weight', 'cross_attn.qkv.weight'],
  ['multihead_attn.in_proj_bias', 'cross_attn.qkv.bias'],
  ['multihead_attn.out_proj.', 'cross_attn.proj.'],
  ['linear1.', 'mlp.fc1.'],
  ['linear2.', 'mlp.fc2.'],
  ['layers.', 'blocks.'],
];

/** The project name of one torch.nn.Transformer* key ("layers.0.self_attn.in_proj_weight" → "blocks.0.attn.qkv.weight"). */
export function torchKeyToProject(key: string): string {
  let k = key;
  for (const [from, to] of TORCH_TO_PROJECT) k = k.replace(from, to);
  return k;
}

/**
 * Renames the keys of a torch.nn.TransformerEncoder / TransformerDecoder / Transformer state dict
 * to this library's names, so `encoder.loadStateDict(fromTorchTransformer(record), {strict: false})`
 * (or a whole model's) loads it. Values are passed through unchanged.
 */
export function fromTorchTransformer<T extends StateDict[string]>(record: Record<string, T>): Record<string, T> {
  if (record === null || typeof record !== 'object') invalidArg('record', 'an object of tensors', record);
  const out: Record<string, T> = {};
  for (const [k, v] of Object.entries(record)) {
    const name = torchKeyToProject(k);
    if (name in out) invalidArg('record', `keys that map to distinct names (${k} collides on ${name})`, record);
    out[name] = v;
  }
  return out;
}
