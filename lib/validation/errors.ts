/** Errors thrown by nodeformer carry a stable `code`. */
export type ErrorCode =
  | 'ERR_NF_INVALID_ARG' // wrong type, rank, shape, dtype or value of an argument
  | 'ERR_NF_DISPOSED' // a disposed tensor or module was used
  | 'ERR_NF_STATE_DICT' // a state dict with missing, unexpected or mis-shaped entries
  | 'ERR_NF_FORMAT' // a malformed weights file
  | 'ERR_NF_NOT_FINITE' // NaN or Inf found by checkFinite
  | 'ERR_NF_STATE' // a call out of order, e.g. backward before forward
  | 'ERR_NF_KERNEL' // a native kernel reported a failure
  | 'ERR_NF_LOAD' // no native addon could be loaded (the message lists what was tried)
  | 'ERR_NF_NO_CUDA' // device 'cuda' asked for, but nodeformer was built without CUDA (no CUDA addon)
  | 'ERR_NF_CUDA' // a CUDA runtime call failed (the message names the call and its file:line)
  | 'ERR_NF_CUDA_OOM' // out of device memory even after the caching allocator released its idle blocks and retried (the message names the request, live and cached bytes, the cache limit, what to try); the process and its models stay usable
  | 'ERR_NF_NO_MPI' // distributed.init() without the MPI addon (nodeformer_mpi.node: Open MPI, `npm run build:mpi`)
  | 'ERR_NF_DISTRIBUTED' // a collective failed or timed out (a rank died or stopped), or ranks disagree (parameter signature)
  | 'ERR_NF_DEVICE' // tensors on different devices in one op, or host access to device memory
  | 'ERR_NF_MISSING_PACKAGE' // an optional peer dependency (sharp, the command line's packages) is not installed; the message names the npm install
  | 'ERR_NF_OUT_OF_MEMORY'; // host memory for a cpu tensor could not be allocated

/** The error type of the library: a message naming the argument, and a stable `code`. */
export class NodeformerError extends Error {
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message: string) {
    super(message);
    this.name = 'NodeformerError';
    this.code = code;
  }
}

/** Describes a value for an error message: "Float32Array of length 3", "number 2.5", "Tensor float32 [2, 3]". */
export function describe(v: unknown): string {
  if (v === null) return 'null';
  if (v === undefined) return 'undefined';
  if (ArrayBuffer.isView(v)) return `${v.constructor.name} of length ${(v as unknown as ArrayLike<number>).length}`;
  if (Array.isArray(v)) return `Array of length ${v.length}`;
  if (typeof v === 'object') {
    const o = v as { shape?: unknown; dtype?: unknown; constructor?: { name?: string } };
    if (Array.isArray(o.shape) && typeof o.dtype === 'string') return `Tensor ${o.dtype} [${o.shape.join(', ')}]`;
    return o.constructor?.name ?? 'object';
  }
  if (typeof v === 'string') return `string ${JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v)}`;
  return `${typeof v} ${String(v)}`;
}

/** Checks an options or config argument: undefined means none ({}); null, arrays and non-objects are errors. */
export function objectArg<T extends object>(name: string, v: T | null | undefined): T {
  if (v === undefined) return {} as T;
  if (v === null || typeof v !== 'object' || Array.isArray(v)) invalidArg(name, 'an options object', v);
  return v;
}

/** Throws ERR_NF_INVALID_ARG: "Expected <expected> for <name> but received <actual>". */
export function invalidArg(name: string, expected: string, actual: unknown): never {
  throw new NodeformerError('ERR_NF_INVALID_ARG', `Expected ${expected} for ${name} but received ${describe(actual)}`);
}
