/**
 * Collectives across processes (ranks) launched by MPI's `mpirun`, on top of the optional addon
 * nodeformer_mpi.node (native/mpi): Open MPI called from one communication thread that the addon
 * owns, never from the main thread or the libuv pool. Every collective returns a Promise settled
 * by that thread, so the event loop stays free while it runs.
 *
 *   await distributed.init();                 // rank and world size from the launcher
 *   await distributed.allReduce(t, 'mean');   // in place
 *   await distributed.broadcast(t, 0);
 *   const all = await distributed.allGather(t); // [worldSize, ...t.shape]
 *   await distributed.barrier();
 *   await distributed.saveCheckpoint(file, { model, optimizer, step }); // rank 0 writes, every rank waits
 *   await resumeAsync(file, { model, optimizer });                      // then every rank reads it
 *   await distributed.finalize();
 *
 * Faults: a collective that does not complete within the timeout (default 60 s; init({ timeoutMs })
 * or NF_DIST_TIMEOUT_MS) rejects with ERR_NF_DISTRIBUTED and the communication thread is abandoned
 * (later collectives fail at once), so a rank whose peer died fails instead of hanging. When
 * mpirun tears the job down after a rank died (SIGTERM), the rank prints ERR_NF_DISTRIBUTED and
 * exits with status 1.
 *
 * Backends: collectives go through the `CommBackend` interface below. 'mpi' reduces host memory;
 * CUDA tensors are staged through host memory (toArray / copyFrom). An NCCL backend (bootstrapped
 * over MPI: rank 0's ncclUniqueId broadcast with MPI_Bcast) would implement the same interface on
 * device buffers (docs/distributed.md).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

import { invalidArg, NodeformerError } from '../validation/errors';
import { packageRoot } from '../native/addon';
import { currentPlatform, MPI_ADDON, resolvePlatformFile } from '../native/platform';
import { Tensor } from '../core/tensor';

type HostArray = Float32Array | Int32Array | Uint8Array | Float64Array;
/** A queued collective: its Promise (resolves with the seconds spent in MPI) and its ticket for waitSync. */
interface RawPending { promise: Promise<number>; ticket: number }

/** The raw interface of nodeformer_mpi.node (native/mpi/binding.cpp). */
export interface MpiBinding {
  init(): { promise: Promise<{ rank: number; size: number; threadLevel: string }>; ticket: number };
  finalize(): RawPending;
  barrier(): RawPending;
  allReduce(arrays: HostArray[], op: ReduceOp): RawPending;
  broadcast(array: HostArray, root: number): RawPending;
  allGather(array: HostArray, out: HostArray): RawPending;
  /** Blocks until the job is done (true; throws its error if it failed) or `timeoutMs` passed (false). */
  waitSync(ticket: number, timeoutMs: number, abortMessage?: string): boolean;
  /** After a timeout: unreferences the pending work so the process can exit. */
  abandon(): void;
  rank(): number;
  size(): number;
  /** Seconds the communication thread has spent inside collectives. */
  busySeconds(): number;
}

export type ReduceOp = 'sum' | 'mean' | 'max';

/** Options of distributed.init. */
export interface InitOptions {
  /** A collective that takes longer fails with ERR_NF_DISTRIBUTED (default NF_DIST_TIMEOUT_MS or 60000). */
  timeoutMs?: number;
}

const INSTALL_HINT = 'Install Open MPI (Debian/Ubuntu: `apt-get install openmpi-bin libopenmpi-dev`; the addon links its ' +
  'libmpi.so.40), and launch with `mpirun -np N node script.js`. The linux-x64-gnu platform package ships the addon; ' +
  'elsewhere build it in a clone of the nodeformer repository with `npm run build:mpi` and set NF_MPI_ADDON_PATH to ' +
  'its native/mpi/build/Release/nodeformer_mpi.node.';

let binding: MpiBinding | null = null;

/**
 * The MPI addon files to look at, in order: NF_MPI_ADDON_PATH alone when set, else the platform
 * package's (where it ships one) and a local build (native/mpi/build/Release, `npm run build:mpi`).
 * Those not found are described in `missing`.
 */
function mpiCandidates(missing: string[]): string[] {
  const explicit = process.env.NF_MPI_ADDON_PATH;
  if (explicit) return [path.resolve(explicit)];
  const files: string[] = [];
  const platform = currentPlatform();
  if (platform?.files.includes(MPI_ADDON)) {
    const r = resolvePlatformFile(platform, MPI_ADDON);
    if ('file' in r) files.push(r.file);
    else missing.push(r.missing);
  }
  try {
    files.push(path.join(packageRoot(__dirname), 'native', 'mpi', 'build', 'Release', MPI_ADDON));
  } catch {
    // no package root (a bundled copy of the library): only NF_MPI_ADDON_PATH or the platform package
  }
  return files;
}

/** The MPI addon: see mpiCandidates; ERR_NF_NO_MPI when none exists or the one found does not load. */
export function mpiBinding(): MpiBinding {
  if (binding) return binding;
  const missing: string[] = [];
  const candidates = mpiCandidates(missing);
  const file = candidates.find((f) => fs.existsSync(f));
  if (!file) {
    const looked = [...missing, ...candidates.map((f) => `${f}: not found`)].join('; ');
    throw new NodeformerError('ERR_NF_NO_MPI', `nodeformer has no MPI addon here (${looked || 'nothing to look at'}). ${INSTALL_HINT}`);
  }
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    binding = require(file) as MpiBinding;
  } catch (e) {
    throw new NodeformerError('ERR_NF_NO_MPI', `nodeformer's distributed addon ${file} could not be loaded: ${(e as Error).message}. ${INSTALL_HINT}`);
  }
  return binding;
}

/** Whether the MPI addon can be loaded (without initialising MPI). */
export function mpiAvailable(): boolean {
  try {
    mpiBinding();
    return true;
  } catch {
    return false;
  }
}

const state = { initialized: false, finalized: false, rank: 0, size: 1, timeoutMs: 60_000, broken: '' };

function distError(message: string): NodeformerError {
  return new NodeformerError('ERR_NF_DISTRIBUTED', `rank ${state.rank} of ${state.size}: ${message}`);
}

/** The timeout in force (ms). */
export function timeoutMs(): number {
  return state.timeoutMs;
}

function requireInit(what: string): MpiBinding {
  if (!state.initialized) throw new NodeformerError('ERR_NF_STATE', `distributed.${what} called before distributed.init()`);
  if (state.finalized) throw new NodeformerError('ERR_NF_STATE', `distributed.${what} called after distributed.finalize()`);
  if (state.broken) throw distError(`distributed.${what}: the communication layer failed earlier (${state.broken})`);
  return mpiBinding();
}

/** Marks the communication layer failed: later collectives fail at once, and the process may exit. */
function breakComm(reason: string): void {
  if (!state.broken) state.broken = reason;
  binding?.abandon();
}

/**
 * A collective in flight. `promise` settles when it is done (rejecting with ERR_NF_DISTRIBUTED on
 * failure or timeout); `waitSync()` blocks the calling thread instead (synchronous training loops).
 */
export class PendingCollective {
  readonly promise: Promise<number>;
  private settled = false;
  constructor(private readonly raw: RawPending, readonly what: string, after?: () => void) {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const msg = `${what} did not complete within ${state.timeoutMs} ms: another rank probably failed or stopped`;
        breakComm(msg);
        reject(distError(msg));
      }, state.timeoutMs);
      timer.unref();
    });
    this.promise = Promise.race([
      raw.promise.then((s) => {
        if (after && !this.settled) after();
        this.settled = true;
        return s;
      }, (e: Error) => {
        breakComm(`${what}: ${e.message}`);
        throw distError(`${what} failed: ${e.message}`);
      }),
      timeout,
    ]).finally(() => clearTimeout(timer));
    this.promise.catch(() => undefined); // a caller that only uses waitSync must not leave an unhandled rejection
  }

  /** Blocks until done; throws ERR_NF_DISTRIBUTED on failure or after the timeout. */
  waitSync(): void {
    if (state.broken) throw distError(`${this.what}: the communication layer failed earlier (${state.broken})`);
    let done: boolean;
    try {
      done = mpiBinding().waitSync(this.raw.ticket, state.timeoutMs, abortMessage());
    } catch (e) {
      breakComm(`${this.what}: ${(e as Error).message}`);
      throw distError(`${this.what} failed: ${(e as Error).message}`);
    }
    if (!done) {
      const msg = `${this.what} did not complete within ${state.timeoutMs} ms: another rank probably failed or stopped`;
      breakComm(msg);
      throw distError(msg);
    }
  }
}

function abortMessage(): string {
  return `NodeformerError [ERR_NF_DISTRIBUTED]: rank ${state.rank} of ${state.size}: the job was aborted by the launcher (another rank failed or was killed)\n`;
}

function onSigterm(): void {
  // mpirun sends SIGTERM to the surviving ranks when one exits abnormally (while the main thread
  // blocks in waitSync, the addon answers it the same way).
  process.stderr.write(abortMessage());
  process.exit(1);
}

/** Initialises MPI on the addon's communication thread; rank and world size come from the launcher (mpirun). */
export async function init(options: InitOptions = {}): Promise<void> {
  if (state.initialized && !state.finalized) return;
  if (state.finalized) throw new NodeformerError('ERR_NF_STATE', 'distributed.init called after distributed.finalize() (MPI cannot be restarted)');
  const env = process.env.NF_DIST_TIMEOUT_MS;
  const t = options.timeoutMs ?? (env ? Number(env) : 60_000);
  if (!(typeof t === 'number' && t > 0 && Number.isFinite(t))) invalidArg('options.timeoutMs', 'a positive number of milliseconds', t);
  state.timeoutMs = t;
  const b = mpiBinding();
  let r: { rank: number; size: number };
  try {
    r = await b.init().promise;
  } catch (e) {
    throw new NodeformerError('ERR_NF_DISTRIBUTED', `distributed.init: ${(e as Error).message}`);
  }
  Object.assign(state, { initialized: true, rank: r.rank, size: r.size });
  process.on('SIGTERM', onSigterm);
}

/** This process's rank (0 before init). */
export function rank(): number {
  return state.rank;
}

/** The number of ranks (1 before init). */
export function worldSize(): number {
  return state.size;
}

export function isInitialized(): boolean {
  return state.initialized && !state.finalized;
}

/** Finalises MPI (after every rank's last collective); the process cannot use collectives afterwards. */
export async function finalize(): Promise<void> {
  if (!isInitialized()) return;
  const b = requireInit('finalize');
  await new PendingCollective(b.finalize(), 'finalize').promise;
  state.finalized = true;
  process.off('SIGTERM', onSigterm);
}

/** Waits until every rank has called barrier. */
export async function barrier(): Promise<void> {
  await new PendingCollective(requireInit('barrier').barrier(), 'barrier').promise;
}

/** The host values a collective works on: a cpu tensor's own storage, or a host copy of a device tensor's (Tensor.hostValues). */
export function hostOf(name: string, t: unknown): HostArray {
  if (!(t instanceof Tensor)) invalidArg(name, 'a Tensor', t);
  return t.hostValues() as HostArray;
}

/** After a collective on `host` (hostOf(t)): the write of the result back into `t` when `host` is a copy, else nothing. */
export function writeBack(t: Tensor, host: HostArray): (() => void) | undefined {
  return host === t.storage ? undefined : () => t.copyFrom(host as never);
}

/**
 * Starts an all-reduce of several tensors as one collective (a bucket): the tensors must share a
 * dtype. Used by allReduce and DistributedDataParallel.
 */
export function startAllReduce(tensors: readonly Tensor[], op: ReduceOp, what = 'allReduce'): PendingCollective {
  const b = requireInit(what);
  if (op !== 'sum' && op !== 'mean' && op !== 'max') invalidArg('op', "'sum', 'mean' or 'max'", op);
  const hosts = tensors.map((t, i) => hostOf(`tensors[${i}]`, t));
  if (op === 'mean' && tensors.some((t) => t.dtype !== 'float32')) invalidArg('tensor', "a float32 Tensor for op 'mean'", tensors.find((t) => t.dtype !== 'float32'));
  if (tensors.some((t) => t.dtype !== tensors[0].dtype)) invalidArg('tensors', 'tensors of one dtype', tensors);
  const backs = tensors.map((t, i) => writeBack(t, hosts[i])).filter((f): f is () => void => !!f);
  return new PendingCollective(b.allReduce(hosts, op), what, backs.length ? () => backs.forEach((f) => f()) : undefined);
}

/** Reduces `t` over every rank, in place: 'sum', 'mean' (float32) or 'max'. */
export async function allReduce<T extends Tensor>(t: T, op: ReduceOp = 'sum'): Promise<T> {
  await startAllReduce([t], op).promise;
  return t;
}

/** Overwrites `t` on every rank with rank `root`'s values, in place. */
export async function broadcast<T extends Tensor>(t: T, root = 0): Promise<T> {
  const b = requireInit('broadcast');
  if (!Number.isInteger(root) || root < 0 || root >= state.size) invalidArg('root', `a rank in [0, ${state.size})`, root);
  const host = hostOf('t', t);
  await new PendingCollective(b.broadcast(host, root), 'broadcast', writeBack(t, host)).promise;
  return t;
}

/** Every rank's `t`, stacked: a new tensor of shape [worldSize, ...t.shape] (on t's device). */
export async function allGather<T extends Tensor>(t: T): Promise<T> {
  const b = requireInit('allGather');
  const host = hostOf('t', t);
  const out = Tensor.zeros([state.size, ...t.shape], t.dtype);
  await new PendingCollective(b.allGather(host, out.data as HostArray), 'allGather').promise;
  return out.moveTo(t.device) as T;
}

/** Seconds the communication thread has spent inside collectives (for overlap measurements). */
export function commSeconds(): number {
  return binding ? binding.busySeconds() : 0;
}

/**
 * Runs `fn` on rank 0 only (writing files, logging, evaluating), then synchronises every rank like
 * a barrier: no rank returns before rank 0's `fn` has settled and every rank has arrived. Resolves
 * with fn's result on rank 0 and undefined on the others. When fn fails on rank 0, every rank
 * rejects (rank 0 with fn's error, the others with ERR_NF_DISTRIBUTED) instead of the others
 * waiting for the timeout. Before init (a single process) it just runs fn.
 */
export async function onRank0<T>(fn: () => T | Promise<T>, what = 'onRank0'): Promise<T | undefined> {
  if (typeof fn !== 'function') invalidArg('fn', 'a function', fn);
  if (!isInitialized()) return await fn();
  let result: T | undefined, error: { value: unknown } | null = null;
  if (state.rank === 0) {
    try {
      result = await fn();
    } catch (e) {
      error = { value: e };
    }
  }
  // An all-reduce of rank 0's failure flag: the barrier, and the failure's news to every rank.
  const failed = Tensor.from(Int32Array.of(error ? 1 : 0), [1]);
  try {
    await startAllReduce([failed], 'max', what).promise;
    if (error) throw error.value;
    if ((failed.data as Int32Array)[0]) throw new NodeformerError('ERR_NF_DISTRIBUTED', `rank ${state.rank} of ${state.size}: ${what} failed on rank 0`);
  } finally {
    failed.dispose();
  }
  return result;
}
