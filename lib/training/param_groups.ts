/**
 * Parameter groups for fine-tuning, timm's conventions (timm.optim param_groups_weight_decay and
 * param_groups_layer_decay): no weight decay for biases, 1-D parameters (norms) and the
 * position/class embeddings, and optionally layer-wise learning-rate decay, where layer l of L
 * (0: the embeddings, 1…L: blocks.0…blocks.L−1, L+1: the final norm and head) gets lrScale
 * layerDecay^(L+1−l). Pass the result to AdamW or SGD.
 */
import { invalidArg } from '../validation/errors';
import type { Module, Parameter } from '../core/module';
import type { ParamGroup } from './optim';
import { OptionKeys } from '../validation/options';

/** Options of paramGroups. */
export interface ParamGroupsOptions {
  /** Weight decay of the decayed parameters (default: the optimizer's). */
  weightDecay?: number;
  /** Names, or last name segments, kept out of weight decay besides biases and 1-D parameters (default: cls_token, pos_embed, dist_token, mask_token). */
  noDecay?: string[];
  /** Layer-wise learning-rate decay factor in (0, 1] (default 1: none). */
  layerDecay?: number;
}
const OPTIONS = new OptionKeys<ParamGroupsOptions>('paramGroups options', { weightDecay: true, noDecay: true, layerDecay: true });

const EMBEDDINGS = /(^|\.)(cls_token|pos_embed|dist_token|mask_token|patch_embed|embed)(\.|$)/;
const BLOCK = /(^|\.)blocks\.(\d+)\./;

/** i + 1 for a parameter of blocks.i, else null. */
function blockLayer(name: string): number | null {
  const block = BLOCK.exec(name);
  return block ? Number(block[2]) + 1 : null;
}

/** The layer of parameter `name` (0 embeddings, i + 1 for blocks.i, depth + 1 the rest). */
function layerOf(name: string, depth: number): number {
  return blockLayer(name) ?? (EMBEDDINGS.test(name) ? 0 : depth + 1);
}

/**
 * The model's trainable parameters (requiresGrad) as optimizer parameter groups: per layer (with
 * layerDecay) a decayed group and a `weightDecay: 0` group, each with its lrScale; empty groups
 * are left out. E.g. `new AdamW(paramGroups(vit, { layerDecay: 0.75 }), { lr: 1e-3, weightDecay: 0.05 })`.
 */
export function paramGroups(model: Module, options: ParamGroupsOptions = {}): ParamGroup<{ weightDecay: number }>[] {
  const o = OPTIONS.check('options', options);
  const layerDecay = o.layerDecay ?? 1;
  if (typeof layerDecay !== 'number' || !(layerDecay > 0 && layerDecay <= 1)) invalidArg('options.layerDecay', 'a number in (0, 1]', layerDecay);
  if (o.weightDecay !== undefined && (typeof o.weightDecay !== 'number' || !(o.weightDecay >= 0)))
    invalidArg('options.weightDecay', 'a non-negative number', o.weightDecay);
  const noDecay = o.noDecay ?? ['cls_token', 'pos_embed', 'dist_token', 'mask_token'];
  if (!Array.isArray(noDecay) || noDecay.some((n) => typeof n !== 'string')) invalidArg('options.noDecay', 'an array of parameter names', noDecay);
  const named = model.namedParameters().filter(([, p]) => p.requiresGrad);
  const depth = Math.max(0, ...named.map(([n]) => blockLayer(n) ?? 0));
  const groups = new Map<string, ParamGroup<{ weightDecay: number }>>();
  for (const [name, p] of named) {
    const layer = layerDecay === 1 ? 0 : layerOf(name, depth);
    const decay = !(p.shape.length <= 1 || name.endsWith('.bias') || noDecay.includes(name) || noDecay.includes(name.slice(name.lastIndexOf('.') + 1)));
    const key = `${layer}/${decay}`;
    let g = groups.get(key);
    if (!g) {
      g = { params: [] as Parameter[], ...(decay ? (o.weightDecay === undefined ? {} : { weightDecay: o.weightDecay }) : { weightDecay: 0 }),
        ...(layerDecay === 1 ? {} : { lrScale: layerDecay ** (depth + 1 - layer) }) };
      groups.set(key, g);
    }
    g.params.push(p);
  }
  return [...groups.values()];
}
