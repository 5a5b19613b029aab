/**
 * Tensor: a dense, row-major array with a shape, a dtype and a device. float32 for values, int32
 * for token ids and labels, bool (Uint8Array, 1 = True) for masks, bfloat16 for the activations of
 * precision 'bf16' (2 bytes: the upper half of a float32's bits; its host array is the
 * raw bits, a Uint16Array, and hostValues()/toArray() give float32 values; cast() converts). On 'cpu' (the default) the
 * values live in an ordinary ArrayBuffer, viewed from its first 64-byte aligned address, that
 * `data` exposes; on 'cuda' they are a block of device memory from the CUDA addon's caching
 * allocator (lib/core/device.ts) that only ops read: copy them with to('cpu') or toArray(). dispose()
 * (or the GC) returns the block to the cache for the next tensor of its size class.
 *
 * Why an ordinary ArrayBuffer: V8 frees it itself when the tensor becomes unreachable, during the
 * GC, with no finalizer waiting for the event loop to turn. So a synchronous loop that never
 * yields and never disposes its outputs (the README's training loop, `model.forward(x)` in a
 * `for`) keeps flat memory. dispose() frees the memory at once by detaching the buffer.
 */
import { checkDevice, cuda, type Device, type DeviceBuffer } from './device';
import { describe, invalidArg, NodeformerError } from '../validation/errors';
import { native } from '../native/addon';
import { currentPool } from './recycle';

export type DType = 'float32' | 'int32' | 'bool' | 'bfloat16';
/** The dtypes of real values: float32, and bfloat16 (the activations of precision 'bf16', see cast). */
export type FloatDType = 'float32' | 'bfloat16';
/** A tensor's storage on the host: bfloat16 as its raw bits (the upper 16 bits of each float32). */
export type TypedArrayOf<D extends DType> = D extends 'float32' ? Float32Array : D extends 'int32' ? Int32Array
  : D extends 'bfloat16' ? Uint16Array : Uint8Array;
/** What hostValues() and toArray() give: the storage's array, but float32 values for bfloat16. */
export type ValuesOf<D extends DType> = D extends 'bfloat16' ? Float32Array : TypedArrayOf<D>;
type AnyData = Float32Array | Int32Array | Uint8Array | Uint16Array;
/** What ops take for a tensor (Tensor.storage): its host array on 'cpu', its device buffer on 'cuda'. */
export type Storage<D extends DType = DType> = TypedArrayOf<D> | DeviceBuffer;

const BYTES: Record<DType, number> = { float32: 4, int32: 4, bool: 1, bfloat16: 2 };

function dtypeOf(data: unknown): DType | null {
  if (data instanceof Float32Array) return 'float32';
  if (data instanceof Int32Array) return 'int32';
  if (data instanceof Uint8Array) return 'bool';
  if (data instanceof Uint16Array) return 'bfloat16';
  return null;
}

function view(buffer: ArrayBuffer, dtype: DType, length: number, offset = 0): AnyData {
  if (dtype === 'float32') return new Float32Array(buffer, offset, length);
  if (dtype === 'int32') return new Int32Array(buffer, offset, length);
  if (dtype === 'bfloat16') return new Uint16Array(buffer, offset, length);
  return new Uint8Array(buffer, offset, length);
}

/** bfloat16 bits → float32 values (exact). */
function bf16ToFloat32(bits: Uint16Array): Float32Array {
  const out = new Float32Array(bits.length);
  native.castBf16(bits, out);
  return out;
}

/** Alignment of a cpu tensor's first element: one cache line, one AVX-512 register. */
const ALIGNMENT = 64;

/**
 * Whether uninitialized tensors are filled with all-ones bytes (NaN in every float32, -1 in every
 * int32), so an op that leaves part of its output unwritten shows up: NF_POISON_UNINITIALIZED=1
 * (the test suite sets it).
 */
const poison = !!process.env.NF_POISON_UNINITIALIZED && process.env.NF_POISON_UNINITIALIZED !== '0';

/**
 * A host buffer of at least `bytes` plus the offset of its 64-byte aligned start. Zero-filled, or
 * uninitialized (Buffer.allocUnsafeSlow: V8-owned memory that skips the fill, never pooled by Node).
 * Inside a program run, a buffer that the run recycled (lib/core/recycle.ts), if one fits: of exactly
 * that size for a zero-filled tensor (gradients, optimizer state: often long-lived), else of up to twice it.
 */
function hostBuffer(bytes: number, uninitialized: boolean): { buffer: ArrayBuffer; offset: number } {
  const total = bytes + ALIGNMENT;
  let buffer = currentPool()?.take(total, uninitialized) ?? null;
  if (buffer && !uninitialized) new Uint8Array(buffer).fill(0);
  try {
    buffer ??= uninitialized ? (Buffer.allocUnsafeSlow(total).buffer as ArrayBuffer) : new ArrayBuffer(total);
  } catch {
    throw new NodeformerError('ERR_NF_OUT_OF_MEMORY', `Out of memory allocating a tensor of ${bytes} bytes`);
  }
  if (uninitialized && poison) new Uint8Array(buffer).fill(0xff);
  return { buffer, offset: native.alignedOffset(buffer) };
}

/** Checks a dtype argument (default 'float32'). */
function checkDType<D extends DType>(dtype: D | undefined): D {
  const dt = (dtype ?? 'float32') as D;
  if (!Object.hasOwn(BYTES, dt)) invalidArg('dtype', "'float32', 'int32', 'bool' or 'bfloat16'", dtype);
  return dt;
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
  private buffer: ArrayBuffer | null = null;
  private _data: TypedArrayOf<D> | null = null;
  private deviceBuffer: DeviceBuffer | null = null;
  /** The flat arena (lib/training/arena.ts) whose buffer this tensor's storage is a slice of, or null when it owns its memory. */
  private arena: Tensor | null = null;
  /** For an arena: how many tensors' storage is a slice of it (the last one to go frees it). */
  private slices = 0;
  /** See `version`. */
  private writes = 0;

  /** A zero-filled tensor on `device` (uninitialized on 'cpu' when `uninitialized`). */
  protected constructor(dtype: D, shape: readonly number[], size: number, device: Device = 'cpu', uninitialized = false) {
    this.dtype = dtype;
    this.shape = Object.freeze([...shape]);
    this.size = size;
    this.allocate(device, uninitialized);
  }

  /** Storage on `device`, zero-filled unless `uninitialized` (the old storage, if any, must be freed first). */
  private allocate(device: Device, uninitialized = false): void {
    if (device === 'cuda') {
      this.deviceBuffer = cuda().alloc(this.size * BYTES[this.dtype], !uninitialized ? 'zero' : poison ? 'poison' : 'none',
        this.dtype === 'bfloat16');
    } else {
      const { buffer, offset } = hostBuffer(this.size * BYTES[this.dtype], uninitialized);
      this.buffer = buffer;
      this._data = view(buffer, this.dtype, this.size, offset) as TypedArrayOf<D>;
    }
  }

  /**
   * A tensor on `device` (default 'cpu') holding a copy of the host array `data` with the given
   * shape: the one way from host values to a tensor on any device (on 'cuda', one upload, no host
   * tensor in between). The dtype follows the array: Float32Array → float32, Int32Array → int32,
   * Uint8Array → bool (1 = True), Uint16Array → bfloat16 (raw bits; cast() makes one from float32).
   */
  static from<A extends Float32Array | Int32Array | Uint8Array | Uint16Array>(
    data: A, shape: readonly number[], device: Device = 'cpu',
  ): Tensor<A extends Float32Array ? 'float32' : A extends Int32Array ? 'int32' : A extends Uint16Array ? 'bfloat16' : 'bool'> {
    const dtype = dtypeOf(data);
    if (!dtype) invalidArg('data', 'a Float32Array, Int32Array, Uint8Array or Uint16Array', data);
    const size = shapeSize(shape);
    if (data.length !== size)
      invalidArg('data', `${size} elements for shape [${shape.join(', ')}]`, data);
    const t = new Tensor(dtype, shape, size, checkDevice('device', device), true);
    t.copyFrom(data as never);
    t.writes = 0;
    return t as never;
  }

  /** A zero-filled tensor on `device` (default 'cpu'; 'cuda' throws ERR_NF_NO_CUDA without a CUDA backend). */
  static zeros<D extends DType = 'float32'>(shape: readonly number[], dtype?: D, device: Device = 'cpu'): Tensor<D> {
    return new Tensor(checkDType(dtype), shape, shapeSize(shape), checkDevice('device', device));
  }

  /**
   * A tensor whose values are whatever its memory held before (on 'cuda', a reused block of the
   * caching allocator: the last tensor's values), for an output that is written whole before it is
   * read: it skips the zero-fill that `zeros` pays. Reading it first gives arbitrary values; with
   * the NF_POISON_UNINITIALIZED environment variable set, every float32 value starts as NaN (on
   * either device), so such a read shows up.
   */
  static empty<D extends DType = 'float32'>(shape: readonly number[], dtype?: D, device: Device = 'cpu'): Tensor<D> {
    return new Tensor(checkDType(dtype), shape, shapeSize(shape), checkDevice('device', device), true);
  }

  /** Where the values live: 'cpu' or 'cuda'. */
  get device(): Device {
    return this.deviceBuffer ? 'cuda' : 'cpu';
  }

  /**
   * The live storage of a cpu tensor (no copy): writes change the tensor. Throws if disposed, and
   * ERR_NF_DEVICE on a cuda tensor (JS cannot touch device memory: use toArray() or to('cpu') for a
   * host copy, copyFrom() to write; no nodeformer function reads `data` of a tensor that may live on
   * a device, so this error always comes from the caller's own code).
   *
   * Each read counts as a write (it bumps `version`), since the caller may write through the array:
   * to change a parameter in place, write through `data` each time (or use copyFrom), not through an
   * array kept from an earlier read, so that what is derived from the values (a Linear's prepacked
   * weight in eval mode) is rebuilt.
   */
  get data(): TypedArrayOf<D> {
    const d = this.host();
    this.writes++;
    return d;
  }

  /** The host array of a cpu tensor, without counting a write (see `data` for the errors). */
  private host(): TypedArrayOf<D> {
    if (this._data) return this._data;
    if (this.deviceBuffer)
      throw new NodeformerError('ERR_NF_DEVICE',
        `This ${describe(this)} is on cuda: its data is device memory that JS cannot read; ` +
          "copy it to the host with toArray() or to('cpu') (and write it with copyFrom())");
    throw new NodeformerError('ERR_NF_DISPOSED', `This ${describe(this)} has been disposed`);
  }

  /**
   * What native ops take for this tensor: the typed array on cpu (the array `data` returns), the
   * opaque device buffer on cuda; program requests accept either (lib/core/program.ts OpArgs), and the
   * program runner sends the op to the addon of the device. For host values use hostValues() (read)
   * or `data` (write). Throws if disposed. Reading it does not bump `version`: a library path that
   * passes it to an op as an output and writes a parameter so calls markWritten().
   */
  get storage(): Storage<D> {
    return this.deviceBuffer ?? this.host();
  }

  /**
   * A counter of the writes the library knows of: every read of `data` (the caller may write through
   * it), copyFrom, fillZero, a move to another device, and every library path that writes the values
   * in place through an op (the optimizers' steps; loadStateDict and the checkpoint and safetensors
   * loaders go through copyFrom). What is derived from the values compares it to know when to rebuild
   * (Linear's prepacked weight). Writes through a raw native op that are not made by the library are
   * not seen: call markWritten() after them.
   */
  get version(): number {
    return this.writes;
  }

  /** Records a write of the values that `version` could not see (an op wrote the storage in place). */
  markWritten(): void {
    this.writes++;
  }

  get disposed(): boolean {
    return this._data === null && this.deviceBuffer === null;
  }

  /**
   * The values in host memory, for reading, on any device: the live storage of a cpu tensor (no
   * copy, and no write counted: do not write through it; `data` is for writing), a fresh copy of a
   * cuda tensor's (one download). The one way from a tensor of either device to host values
   * (candle's to_cpu_storage); toArray() when the caller needs a copy it owns on every device.
   * bfloat16: a fresh Float32Array of the values on either device.
   */
  hostValues(): ValuesOf<D> {
    if (this.dtype === 'bfloat16') return this.toArray();
    return (this.deviceBuffer ? this.toArray() : this.host()) as ValuesOf<D>;
  }

  /** A copy of the values in host memory (Float32Array, Int32Array, Uint8Array for bool; float32 values for bfloat16). */
  toArray(): ValuesOf<D> {
    const bits = this.storageCopy();
    return (this.dtype === 'bfloat16' ? bf16ToFloat32(bits as Uint16Array) : bits) as ValuesOf<D>;
  }

  /** A host copy of the storage (bfloat16 as bits). */
  private storageCopy(): TypedArrayOf<D> {
    if (!this.deviceBuffer) return this.host().slice() as TypedArrayOf<D>;
    const out = view(new ArrayBuffer(this.size * BYTES[this.dtype]), this.dtype, this.size) as TypedArrayOf<D>;
    cuda().download(out, this.deviceBuffer);
    return out;
  }

  /**
   * This tensor's values as `dtype`, float32 ↔ bfloat16 (bfloat16 rounds to nearest even, back is
   * exact): the tensor itself when it has that dtype already, else a new tensor on the same device
   * (on 'cuda' one conversion kernel; on 'cpu' the addon's castBf16, which rounds as the CPU kernels
   * store bf16: float32 denormals become zeros), or `out` (a tensor of that dtype, shape and device)
   * written in place. Other dtypes throw ERR_NF_INVALID_ARG.
   */
  cast<F extends FloatDType>(dtype: F, out?: Tensor<F>): Tensor<F> {
    if ((dtype as DType) === this.dtype && !out) return this as unknown as Tensor<F>;
    if ((dtype !== 'float32' && dtype !== 'bfloat16') || (this.dtype !== 'float32' && this.dtype !== 'bfloat16') || (dtype as DType) === this.dtype)
      invalidArg('dtype', `'float32' or 'bfloat16' for a float tensor (this one is ${this.dtype})`, dtype);
    if (this.disposed) throw new NodeformerError('ERR_NF_DISPOSED', `This ${describe(this)} has been disposed`);
    if (out && (out.dtype !== dtype || out.device !== this.device || out.size !== this.size || out.disposed))
      invalidArg('out', `a ${dtype} tensor of ${this.size} elements on ${this.device}`, out);
    const t = out ?? new Tensor(dtype, this.shape, this.size, this.device, true);
    if (this.deviceBuffer) cuda().cast(t.deviceBuffer!, this.deviceBuffer);
    else native.castBf16(this.host() as Float32Array | Uint16Array, t.host() as Uint16Array | Float32Array);
    t.writes++;
    return t;
  }

  /** Overwrites the values with `values` (a host array of the tensor's dtype and size; bfloat16: its bits), on either device. */
  copyFrom(values: TypedArrayOf<D>): this {
    if (dtypeOf(values) !== this.dtype || values.length !== this.size)
      invalidArg('values', `a ${this.dtype} array of ${this.size} elements`, values);
    if (this.deviceBuffer) cuda().upload(this.deviceBuffer, values);
    else this.host().set(values as never);
    this.writes++;
    return this;
  }

  /** Sets every element to zero, on the tensor's device. */
  fillZero(): this {
    if (this.deviceBuffer) cuda().fillZero(this.deviceBuffer);
    else this.host().fill(0);
    this.writes++;
    return this;
  }

  /**
   * This tensor's values on `device`: the tensor itself when it is already there (as PyTorch),
   * else a new tensor holding a copy (an explicit host↔device copy on the CUDA backend's stream).
   */
  to(device: Device): Tensor<D> {
    checkDevice('device', device);
    if (this.disposed) throw new NodeformerError('ERR_NF_DISPOSED', `This ${describe(this)} has been disposed`);
    if (device === this.device) return this;
    const t = new Tensor(this.dtype, this.shape, this.size, device, true);
    return t.copyFrom(this.deviceBuffer ? this.storageCopy() : this.host());
  }

  /** A new tensor (on the same device) with the same data and another shape of the same size. */
  reshape(shape: readonly number[]): Tensor<D> {
    const size = shapeSize(shape);
    if (size !== this.size) invalidArg('shape', `a shape of ${this.size} elements`, shape);
    if (!this.deviceBuffer) return Tensor.from(this.host(), shape) as unknown as Tensor<D>;
    const t = new Tensor(this.dtype, shape, size, 'cuda', true);
    cuda().copy(t.deviceBuffer!, this.deviceBuffer);
    return t;
  }

  /**
   * @internal Makes this CPU tensor's storage the elements [offset, offset + size) of `arena` (a CPU
   * tensor of the same dtype: a flat arena, lib/training/arena.ts), copying its values there. The tensor then
   * reads and writes the arena's memory; its dispose() drops the view, and the arena's memory is
   * freed when its last slice is disposed or moved out. Returns this.
   */
  moveInto(arena: Tensor<D>, offset: number): this {
    if (arena.dtype !== this.dtype || arena.device !== 'cpu' || !Number.isInteger(offset) || offset < 0 || offset + this.size > arena.size)
      invalidArg('offset', `a slice of a ${this.dtype} CPU arena that holds ${describe(this)}`, offset);
    const slice = view(arena.buffer!, this.dtype, this.size, arena.host().byteOffset + offset * BYTES[this.dtype]) as TypedArrayOf<D>;
    slice.set(this.host() as never);
    this.releaseStorage();
    this._data = slice;
    this.arena = arena;
    arena.slices += 1;
    return this;
  }

  /** @internal Whether this tensor's storage is the slice of `arena` that starts `offset` elements in. */
  isSliceOf(arena: Tensor<D>, offset: number): boolean {
    return this.arena === arena && this._data !== null && this._data.byteOffset === arena.host().byteOffset + offset * BYTES[this.dtype];
  }

  /**
   * Moves the storage to `device` in place (Module.to moves its parameters so): the values are
   * copied and the old storage freed; nothing happens when it is there already. Returns this.
   */
  moveTo(device: Device): this {
    checkDevice('device', device);
    if (device === this.device) return this;
    const values = this.storageCopy();
    this.releaseStorage();
    this.allocate(device, true);
    return this.copyFrom(values);
  }

  /**
   * Frees the memory now (host or device; a host buffer that an async op still uses, when that op
   * settles); later use throws ERR_NF_DISPOSED. Idempotent. Optional: memory of a tensor that is
   * no longer referenced is freed by the GC.
   */
  dispose(): void {
    this.releaseStorage();
  }

  /**
   * @internal dispose() for an intermediate that no caller has seen: inside a program run, its host
   * buffer goes to the run's pool (lib/core/recycle.ts) for the run's next tensor of the same size instead
   * of being detached, so a view of its data kept from before would read that tensor's values.
   */
  recycle(): void {
    const pool = currentPool();
    if (!pool || !this.buffer || this.arena || this.slices > 0) return this.dispose();
    pool.give(this.buffer);
    this.buffer = null;
    this._data = null;
  }

  /** Frees (or, for a slice of an arena, drops) this tensor's storage: what dispose() does, without a subclass's additions. */
  private releaseStorage(): void {
    if (this.arena) {
      if (--this.arena.slices === 0) this.arena.releaseStorage();
      this.arena = null;
      this._data = null;
      return;
    }
    if (this.deviceBuffer) {
      cuda().free(this.deviceBuffer);
      this.deviceBuffer = null;
    }
    if (!this.buffer) return;
    native.release(this.buffer);
    this.buffer = null;
    this._data = null;
  }

  [Symbol.dispose](): void {
    this.dispose();
  }

  toString(): string {
    return `Tensor(${this.dtype}, [${this.shape.join(', ')}]${this.deviceBuffer ? ", device='cuda'" : ''})`;
  }
}

/**
 * Validates an activation argument of a layer that runs under every precision: a float32 tensor, or
 * a bfloat16 one (the activations of precision 'bf16' on 'cuda'), shape as checkTensor. Typed as
 * float32 (the layers hand activations on as float values whatever their storage; the ops that take
 * bfloat16 read its dtype from the buffer, the others reject it with an error naming the field).
 */
export function checkActivation(name: string, t: unknown, shape?: readonly (number | null)[]): Tensor<'float32'> {
  if (t instanceof Tensor && t.dtype === 'bfloat16') return checkTensor(name, t, 'bfloat16', shape) as unknown as Tensor<'float32'>;
  return checkTensor(name, t, 'float32', shape);
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

/**
 * An uninitialized tensor (an op's output) on the device of `like`, with its shape but last dimension
 * `last`: float32, or bfloat16 when `like` is (the activations of precision 'bf16'; typed as float32,
 * see checkActivation).
 */
export function emptyLike(like: Tensor, last = like.shape[like.shape.length - 1]): Tensor<'float32'> {
  return Tensor.empty([...like.shape.slice(0, -1), last], like.dtype === 'bfloat16' ? 'bfloat16' : 'float32', like.device) as Tensor<'float32'>;
}

/** Disposes every tensor given (nulls skipped). */
export function disposeAll(...ts: (Tensor | null | undefined)[]): void {
  for (const t of ts) t?.dispose();
}
