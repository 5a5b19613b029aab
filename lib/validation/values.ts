/** Checks of config fields and arguments (positive integers, probabilities, choices, seeds, non-empty dims), each an ERR_NF_INVALID_ARG naming the field. */
import { invalidArg } from './errors';

/** A module's checked config as it keeps it: every field set, without `device` (where it lives is not part of its config). */
export type Settings<C> = Required<Omit<C, 'device' | 'precision'>>;

/** Checks a config field is a positive integer. */
export function positiveInt(name: string, v: unknown): number {
  if (!Number.isInteger(v) || (v as number) < 1) invalidArg(name, 'a positive integer', v);
  return v as number;
}

/** Checks a config field is a probability in [0, 1). */
export function probability(name: string, v: unknown): number {
  if (typeof v !== 'number' || !(v >= 0 && v < 1)) invalidArg(name, 'a number in [0, 1)', v);
  return v;
}

/** Checks a config field is a finite positive number. */
export function positive(name: string, v: unknown): number {
  if (typeof v !== 'number' || !(v > 0) || !Number.isFinite(v)) invalidArg(name, 'a finite positive number', v);
  return v;
}

/** Checks a config field is one of `options`. */
export function oneOf<T extends string>(name: string, v: unknown, options: readonly T[]): T {
  if (!options.includes(v as T)) invalidArg(name, options.map((o) => `'${o}'`).join(' | '), v);
  return v as T;
}

/** Checks a config field is a boolean. */
export function bool(name: string, v: unknown): boolean {
  if (typeof v !== 'boolean') invalidArg(name, 'a boolean', v);
  return v;
}

/**
 * Checks that the dims of `t` listed in `dims` (index → what the dim is: 'a batch') are at least
 * 1: "Expected a batch of at least 1 for images but received Tensor float32 [0, 1, 28, 28]".
 */
export function nonEmpty<T extends { readonly shape: readonly number[] }>(name: string, t: T, dims: Record<number, string>): T {
  for (const [i, what] of Object.entries(dims)) if (!(t.shape[Number(i)] >= 1)) invalidArg(name, `${what} of at least 1`, t);
  return t;
}

/** Checks the seed: an integer in [0, 2^53). */
export function seedOf(v: unknown): number {
  if (!Number.isSafeInteger(v) || (v as number) < 0) invalidArg('seed', 'a non-negative integer', v);
  return v as number;
}
