/**
 * Options and config objects: the keys of each type are declared once, as a KeySpec that the
 * compiler checks against the TypeScript type in both directions (a key missing from the spec or
 * one the type lacks does not compile), and every object a user passes is checked against them,
 * so a misspelt key ("casual" for "causal") is an ERR_NF_INVALID_ARG error instead of being
 * silently ignored.
 */
import { NodeformerError, objectArg } from './errors';
import { aliasOf } from './option_aliases';

/** One `true` per key of T, optional keys included: an object literal of this type can neither miss a key of T nor add one. */
export type KeySpec<T> = { readonly [K in keyof Required<T>]: true };

/** The allowed keys of one options or config type, and the check of an object against them. */
export class OptionKeys<T extends object> {
  /** The allowed keys, in declaration order. */
  readonly keys: readonly string[];

  /** `label` names the object in messages ("MultiHeadAttention.forward options"). */
  constructor(readonly label: string, spec: KeySpec<T>) {
    this.keys = Object.keys(spec);
  }

  /**
   * Checks the argument `name`: undefined means none ({}); null, arrays and non-objects are errors
   * (objectArg), and so is any own key outside the set, named with the closest allowed key when one
   * is close. `label` overrides the constructor's (a subclass's name).
   */
  check(name: string, value: T | null | undefined, label = this.label): T {
    const v = objectArg(name, value);
    const unknown = Object.keys(v).filter((k) => !this.keys.includes(k));
    if (unknown.length) throw unknownKeys(unknown, this.keys, label);
    return v;
  }
}

function unknownKeys(unknown: string[], allowed: readonly string[], label: string): NodeformerError {
  const parts = unknown.map((k) => {
    const near = closestKey(k, allowed);
    return `'${k}'${near === null ? '' : ` (did you mean '${near}'?)`}`;
  });
  return new NodeformerError('ERR_NF_INVALID_ARG',
    `Unknown key${unknown.length > 1 ? 's' : ''} ${parts.join(', ')} in ${label}; allowed keys: ${allowed.join(', ')}`);
}

/**
 * The allowed key closest to `key`: the same key spelt another way or another library's name for it
 * (aliasOf: weight_decay, learningRate, nhead), else one within 2 edits (insertions, deletions,
 * substitutions, swaps of neighbours) and fewer edits than `key` has characters; null when none is.
 */
function closestKey(key: string, allowed: readonly string[]): string | null {
  const alias = aliasOf(key, allowed);
  if (alias !== null) return alias;
  let best: string | null = null, bestD = Infinity;
  const limit = Math.min(2, Math.max(1, key.length - 1));
  for (const a of allowed) {
    const d = editDistance(key.toLowerCase(), a.toLowerCase());
    if (d <= limit && d < bestD) (best = a), (bestD = d);
  }
  return best;
}

/** Optimal string alignment distance: Levenshtein plus the swap of two neighbouring characters. */
function editDistance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++)
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.length][b.length];
}
