/**
 * Tensor: a dense, row-major array in 64-byte aligned native memory with a shape and a dtype.
 * float32 for values, int32 for token ids and labels, bool (Uint8Array, 1 = True) for masks.
 */
import { describe, invalidArg, NodeformerError } from './errors';
import { native } from './native';

export type DType = 'float32' | 'int32' | 'bool';
export type TypedArrayOf<D extends DType> = D extends 'float32' ? Float32Array : D extends 'int32' ? Int32Array : Uint8Array;
type AnyData = Float32Array | Int32Array | Uint8Array;

const BYTES: Record<DType, number> = { float32: 4, int32: 4, bool: 1 };

function dtypeOf(data: unknown): DType | null {
  if (data instanceof Float32Array) return 'float32';
  if (data instanceof Int32Array) return 'int32';
  if (data instanceof Uint8Array) return 'bool';
  return null;
}

function view(buffer: ArrayBuffer, dtype: DType, length: number): AnyData {
  if (dtype === 'float32') return new Float32Array(buffer, 0, length);
  if (dtype === 'int32') return new Int32Array(buffer, 0, length);
  return new Uint8Array(buffer, 0, length);
}

/** The most elements a tensor may have, as the native ops (Args::count): 2^40. */
const MAX_ELEMENTS = 2 ** 40;

/** Checks a shape: an array of non-negative integers, at most 2^40 elements in all. Returns its element count. */
export function shapeSize(shape: readonly number[], name = 'shape'): number {
  if (!Array.isArray(shape) || shape.some((d) => !Number.isInteger(d) || d < 0))
    invalidArg(name, 'an array of non-negative integers', shape);
  const size = shape.reduce((a, b) => a * b, 1);
  if (size > MAX_ELEMENTS) invalidArg(name, `a shape of at most 2^40 elements (this one has ${size})`, shape);
  return size;
}

export class Tensor<D extends DType = DType> {
  /** Row-major dimensions. */
  readonly shape: readonly number[];
  readonly dtype: D;
  /** Number of elements. */
  readonly size: number;
  private buffer: ArrayBuffer | null;
  private _data: TypedArrayOf<D> | null;

  protected constructor(dtype: D, shape: readonly number[], size: number) {
    this.dtype = dtype;
    this.shape = Object.freeze([...shape]);
    this.size = size;
    this.buffer = native.allocate(size * BYTES[dtype]);
    this._data = view(this.buffer, dtype, size) as TypedArrayOf<D>;
  }

  /**
   * A tensor holding a copy of `data` with the given shape. The dtype follows the array:
   * Float32Array → float32, Int32Array → int32, Uint8Array → bool (1 = True).
   */
  static from<A extends Float32Array | Int32Array | Uint8Array>(
    data: A, shape: readonly number[],
  ): Tensor<A extends Float32Array ? 'float32' : A extends Int32Array ? 'int32' : 'bool'> {
    const dtype = dtypeOf(data);
    if (!dtype) invalidArg('data', 'a Float32Array, Int32Array or Uint8Array', data);
    const size = shapeSize(shape);
    if (data.length !== size)
      invalidArg('data', `${size} elements for shape [${shape.join(', ')}]`, data);
    const t = new Tensor(dtype, shape, size);
    (t._data as AnyData).set(data);
    return t as never;
  }

  /** A zero-filled tensor. */
  static zeros<D extends DType = 'float32'>(shape: readonly number[], dtype?: D): Tensor<D> {
    const dt = (dtype ?? 'float32') as D;
    if (!Object.hasOwn(BYTES, dt)) invalidArg('dtype', "'float32', 'int32' or 'bool'", dtype);
    return new Tensor(dt, shape, shapeSize(shape));
  }

  /** The live storage (no copy): writes change the tensor. Throws if disposed. */
  get data(): TypedArrayOf<D> {
    if (!this._data) throw new NodeformerError('ERR_NF_DISPOSED', `This ${describe(this)} has been disposed`);
    return this._data;
  }

  get disposed(): boolean {
    return this._data === null;
  }

  /** A copy of the values (Float32Array, Int32Array, or Uint8Array for bool). */
  toArray(): TypedArrayOf<D> {
    return this.data.slice() as TypedArrayOf<D>;
  }

  /** A new tensor with the same data and another shape of the same size. */
  reshape(shape: readonly number[]): Tensor<D> {
    const size = shapeSize(shape);
    if (size !== this.size) invalidArg('shape', `a shape of ${this.size} elements`, shape);
    return Tensor.from(this.data, shape) as unknown as Tensor<D>;
  }

  /** Frees the native memory now; later use throws ERR_NF_DISPOSED. Idempotent. */
  dispose(): void {
    if (!this.buffer) return;
    native.release(this.buffer);
    this.buffer = null;
    this._data = null;
  }

  [Symbol.dispose](): void {
    this.dispose();
  }

  toString(): string {
    return `Tensor(${this.dtype}, [${this.shape.join(', ')}])`;
  }
}

/** Validates a tensor argument: dtype and shape, where a null entry in `shape` matches any size. */
export function checkTensor<D extends DType>(
  name: string, t: unknown, dtype: D, shape?: readonly (number | null)[],
): Tensor<D> {
  if (!(t instanceof Tensor)) invalidArg(name, `a ${dtype} Tensor`, t);
  if (t.disposed) throw new NodeformerError('ERR_NF_DISPOSED', `${name} is a disposed tensor`);
  const wanted = shape ? `[${shape.map((d) => (d === null ? '*' : d)).join(', ')}]` : '';
  if (t.dtype !== dtype) invalidArg(name, `a ${dtype} Tensor ${wanted}`.trim(), t);
  if (shape && (t.shape.length !== shape.length || shape.some((d, i) => d !== null && d !== t.shape[i])))
    invalidArg(name, `a ${dtype} Tensor of shape ${wanted}`, t);
  return t as Tensor<D>;
}
