/**
 * checkFinite mode: an opt-in debugging aid. While it is on, every module call scans the float32
 * tensors entering and leaving it — the forward/backward arguments (and the tensors inside an
 * options object), the module's own parameters, the outputs, and the parameter gradients a
 * backward wrote — and throws ERR_NF_NOT_FINITE naming the first one that holds a NaN or ±Inf.
 * Inner modules check their own inputs and outputs, so the error points at the first layer where
 * a non-finite value appeared. Losses check their inputs, and optimizers every gradient before
 * updating any parameter. Off by default (it costs one pass over each tensor, the firstNonFinite op
 * on the tensor's device: native/cpu/finite.h, native/cuda/finite.cu); turn it on with
 * setCheckFinite(true) or NF_CHECK_FINITE=1.
 */
import { describe, invalidArg, NodeformerError } from '../validation/errors';
import { cuda, type DeviceBuffer } from './device';
import { op, runSync } from './program';
import { Tensor } from './tensor';

let enabled = /^(1|true|on|yes)$/i.test(process.env.NF_CHECK_FINITE ?? '');

/** Turns checkFinite mode on or off (initially on when the environment sets NF_CHECK_FINITE=1). */
export function setCheckFinite(on: boolean): void {
  if (typeof on !== 'boolean') invalidArg('on', 'a boolean', on);
  enabled = on;
}

/** Whether checkFinite mode is on. */
export function checkFiniteEnabled(): boolean {
  return enabled;
}

const found = new Float64Array(1);

/**
 * The flat position of the first NaN or ±Inf of `t`, or −1: the firstNonFinite op on the tensor's
 * device, whose float64 result lives beside x (a host array, or 8 bytes of device memory read back).
 */
function firstNonFinite(t: Tensor<'float32'>): number {
  const index: Float64Array | DeviceBuffer = t.device === 'cpu' ? found : cuda().alloc(8, 'none');
  try {
    runSync(op('firstNonFinite', { n: t.size, x: t.storage, index }));
    if (index === found) return found[0];
    const bytes = new Uint8Array(8);
    cuda().download(bytes, index as DeviceBuffer);
    return new Float64Array(bytes.buffer)[0];
  } finally {
    if (index !== found) cuda().free(index as DeviceBuffer);
  }
}

/** Throws ERR_NF_NOT_FINITE naming `name` when the float32 tensor `t` holds a NaN or ±Inf (other dtypes always pass). */
export function assertFinite(name: string, t: Tensor): void {
  if ((t.dtype !== 'float32' && t.dtype !== 'bfloat16') || t.disposed) return;
  const f = (t as Tensor<'float32'>).cast('float32'); // (bfloat16 activations: scanned as float32, the same values)
  const i = firstNonFinite(f);
  if (f !== t) f.dispose();
  if (i >= 0)
    throw new NodeformerError('ERR_NF_NOT_FINITE',
      `Expected finite values for ${name} but received ${describe(t)} holding ${t.hostValues()[i]} at flat index ${i}`);
}

/** Under checkFinite mode, assertFinite on each named tensor (the names as errors should show them). */
export function checkFiniteArgs(tensors: Record<string, Tensor | null | undefined>): void {
  if (!enabled) return;
  for (const [name, t] of Object.entries(tensors)) if (t) assertFinite(name, t);
}

/**
 * assertFinite over what a module call takes or returns: a Tensor, or the Tensors that are direct
 * fields of an object or elements of an array (named `name.field` / `name[i]`).
 */
export function assertFiniteIn(name: string, value: unknown): void {
  if (value instanceof Tensor) assertFinite(name, value);
  else if (Array.isArray(value)) value.forEach((v, i) => v instanceof Tensor && assertFinite(`${name}[${i}]`, v));
  else if (value !== null && typeof value === 'object')
    for (const [k, v] of Object.entries(value)) if (v instanceof Tensor) assertFinite(`${name}.${k}`, v);
}
