/**
 * DistributedDataParallel: data-parallel training over the ranks of an MPI job (lib/distributed/collectives.ts).
 * It wraps a model as a Module whose forward, backward, parameters, stateDict, train and eval pass
 * through to the model, so trainStep / trainStepAsync / checkpoints take it in the model's place.
 * It is generic over the model: `new DistributedDataParallel(vit).forward(x)` takes and returns
 * what `vit.forward` does (forward, backward and their Async twins are typed from M's programs).
 *
 * - Start: the ranks compare a signature of their parameter lists (count, shapes, dtypes) — a
 *   mismatch is ERR_NF_DISTRIBUTED naming the first differing parameter — and then every parameter
 *   is broadcast from rank 0. Both are started by the constructor and completed by the first forward
 *   (or `await ddp.ready()`).
 * - Backward: gradients are grouped into buckets in reverse parameter order (firstBucketBytes for
 *   the first, which fills earliest, then bucketBytes). The backward program of the model runs op by
 *   op; each bucket's averaging all-reduce is started on the communication thread as soon as the
 *   last op writing one of its gradients has run — known from the previous step's trace of which op
 *   last touched each gradient (the first step launches every bucket at the end) — so it overlaps
 *   the rest of backward. The backward program ends by waiting for every bucket, so the optimizer
 *   step after it sees averaged gradients. Buckets are started in the same order on every rank.
 * - noSync(fn): backwards inside fn accumulate gradients locally, without communication (gradient
 *   accumulation); the next synchronised backward averages the accumulated sums.
 */
import * as distributed from './collectives';
import { PendingCollective, startAllReduce } from './collectives';
import { invalidArg, NodeformerError } from '../validation/errors';
import { type EvalOptions, type LoadStateDictOptions, Module, type Parameter, type ProgramArgs, type ProgramResult, type StateDict } from '../core/module';
import { OptionKeys } from '../validation/options';
import { type Lane, type OpRequest, type Program, registerHostOp } from '../core/program';
import type { Random } from '../core/random';
import { Tensor } from '../core/tensor';
import type { Device } from '../core/device';

export interface DistributedDataParallelOptions {
  /** Bytes of gradients per all-reduce bucket (default 25 MiB). */
  bucketBytes?: number;
  /** Bytes of the first bucket (the last parameters, whose gradients are final first; default 1 MiB). */
  firstBucketBytes?: number;
  /** Start each bucket's all-reduce during backward (default true); false: every bucket after backward. */
  overlap?: boolean;
}
const OPTIONS = new OptionKeys<DistributedDataParallelOptions>('DistributedDataParallel options',
  { bucketBytes: true, firstBucketBytes: true, overlap: true });

/** Communication statistics since construction (or resetStats). */
export interface DdpStats {
  /** Synchronised backward passes. */
  steps: number;
  /** Seconds the communication thread spent in collectives (gradient all-reduces and the rest). */
  commSeconds: number;
  /** Seconds the main program waited for buckets after backward: the part of communication backward did not hide. */
  exposedSeconds: number;
  /** Seconds of the backward passes themselves (before the wait). */
  backwardSeconds: number;
  /** Buckets whose all-reduce started while backward was still running (overlapped). */
  earlyBuckets: number;
}

interface WaitArgs { pending: PendingCollective[]; stats?: DdpStats }
let waitRegistered = false;
function registerWait(): void {
  if (waitRegistered) return;
  waitRegistered = true;
  registerHostOp('distWait', (a) => {
    const { pending, stats } = a as WaitArgs;
    const t0 = performance.now();
    for (const p of pending) p.waitSync();
    if (stats) stats.exposedSeconds += (performance.now() - t0) / 1000;
  }, async (a) => {
    const { pending, stats } = a as WaitArgs;
    const t0 = performance.now();
    await Promise.all(pending.map((p) => p.promise));
    if (stats) stats.exposedSeconds += (performance.now() - t0) / 1000;
  });
}
function* waitOps(pending: PendingCollective[], stats?: DdpStats): Program<void> {
  if (pending.length) yield { op: 'distWait', args: { pending, stats } } as unknown as OpRequest;
}

/** FNV-1a of a string, as an int32. */
function fnv(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h | 0;
}

type AnyProgramFn = (...args: unknown[]) => Program<unknown>;

export class DistributedDataParallel<M extends Module = Module> extends Module {
  readonly module: M;
  readonly bucketBytes: number;
  readonly firstBucketBytes: number;
  readonly overlap: boolean;
  /** Parameter indices per bucket (reverse parameter order). */
  readonly buckets: number[][];
  readonly stats: DdpStats = { steps: 0, commSeconds: 0, exposedSeconds: 0, backwardSeconds: 0, earlyBuckets: 0 };
  private readonly gradParams: Parameter[];
  private readonly paramNames: string[];
  private sync = true;
  /** For each bucket, the backward op index after which its gradients are final (from the last step's trace). */
  private readyAfter: number[] | null = null;
  private startState: 'signature' | 'broadcast' | 'ready' = 'signature';
  private startPending: PendingCollective[] = [];
  private signature: Int32Array;

  constructor(model: M, options: DistributedDataParallelOptions = {}) {
    super();
    if (!(model instanceof Module)) invalidArg('model', 'a Module', model);
    const o = OPTIONS.check('options', options);
    const bytes = (name: string, v: number | undefined, d: number) => {
      const x = v ?? d;
      if (!Number.isInteger(x) || x < 1) invalidArg(`options.${name}`, 'a positive integer number of bytes', x);
      return x;
    };
    this.bucketBytes = bytes('bucketBytes', o.bucketBytes, 25 * 1024 * 1024);
    this.firstBucketBytes = bytes('firstBucketBytes', o.firstBucketBytes, 1024 * 1024);
    this.overlap = o.overlap ?? true;
    if (!distributed.isInitialized())
      throw new NodeformerError('ERR_NF_STATE', 'new DistributedDataParallel called before `await distributed.init()`');
    this.module = model;
    const named = model.namedParameters().filter(([, p]) => p.requiresGrad); // (frozen ones have no gradient to average)
    this.gradParams = named.map(([, p]) => p);
    this.paramNames = named.map(([n]) => n);
    this.buckets = [];
    let cur: number[] = [], size = 0;
    for (let i = this.gradParams.length - 1; i >= 0; i--) {
      cur.push(i);
      size += this.gradParams[i].size * 4;
      if (size >= (this.buckets.length === 0 ? this.firstBucketBytes : this.bucketBytes)) {
        this.buckets.push(cur);
        cur = [];
        size = 0;
      }
    }
    if (cur.length) this.buckets.push(cur);
    registerWait();
    // The parameter signature: [count, hash of the list, per-parameter hashes], compared first.
    const per = this.gradParams.map((p) => fnv(`float32[${p.shape.join(',')}]`));
    this.signature = Int32Array.of(per.length, fnv(per.join(',')));
    this.perParam = Int32Array.from(per);
    const sig = Tensor.from(this.signature, [2]);
    this.gathered = Tensor.zeros([distributed.worldSize(), 2], 'int32');
    this.startPending = [this.gatherSignature(sig)];
    super.train(model.training);
  }

  private perParam: Int32Array;
  private gathered: Tensor;

  private gatherSignature(sig: Tensor): PendingCollective {
    // allGather through the raw binding so the constructor stays synchronous.
    const b = distributed.mpiBinding();
    return new PendingCollective(b.allGather(sig.data as Int32Array, this.gathered.data as Int32Array), 'DistributedDataParallel signature check');
  }

  /**
   * Completes the start: checks the signatures, then broadcasts every parameter from rank 0 and
   * waits. The first forward runs it; ready() runs it off the main thread.
   */
  *readyOps(): Program<void> {
    if (this.startState === 'ready') return;
    if (this.startState === 'signature') {
      yield* waitOps(this.startPending);
      const g = this.gathered.data as Int32Array, n = distributed.worldSize();
      let same = true;
      for (let r = 1; r < n; r++) if (g[2 * r] !== g[0] || g[2 * r + 1] !== g[1]) same = false;
      if (!same) yield* this.signatureMismatch(g);
      this.startState = 'broadcast';
      const b = distributed.mpiBinding();
      this.startPending = this.gradParams.map((p) => {
        const host = distributed.hostOf('parameter', p);
        return new PendingCollective(b.broadcast(host, 0), 'DistributedDataParallel parameter broadcast', distributed.writeBack(p, host));
      });
    }
    yield* waitOps(this.startPending);
    this.startPending = [];
    this.startState = 'ready';
  }

  /** Finds the first parameter whose signature differs between ranks and throws ERR_NF_DISTRIBUTED naming it. */
  private *signatureMismatch(g: Int32Array): Program<never> {
    const n = distributed.worldSize();
    let max = 0;
    for (let r = 0; r < n; r++) max = Math.max(max, g[2 * r]);
    const mine = new Int32Array(max + 1);
    mine.set(this.perParam);
    mine.fill(0x7fffffff, this.perParam.length);
    const all = new Int32Array((max + 1) * n);
    const pend = new PendingCollective(distributed.mpiBinding().allGather(mine, all), 'DistributedDataParallel signature check');
    yield* waitOps([pend]);
    let first = -1;
    for (let i = 0; i <= max && first < 0; i++) for (let r = 1; r < n; r++) if (all[r * (max + 1) + i] !== all[i]) first = i;
    const counts = Array.from({ length: n }, (_, r) => g[2 * r]);
    const what = first < this.gradParams.length
      ? `parameter #${first} (${this.paramNames[first]}: float32 [${this.gradParams[first].shape.join(', ')}] on rank ${distributed.rank()})`
      : `parameter #${first} (this rank has only ${this.gradParams.length} parameters)`;
    this.startState = 'signature';
    throw new NodeformerError('ERR_NF_DISTRIBUTED',
      `rank ${distributed.rank()} of ${n}: DistributedDataParallel: the ranks' models differ (parameter counts per rank: ${counts.join(', ')}); ` +
      `the first differing parameter is ${what}`);
  }

  /** Resolves when the signature check and the initial broadcast are done (the first forward also waits for them). */
  ready(): Promise<void> {
    return this.enqueueOps(() => this.readyOps());
  }

  /** The wrapped model's forward (same arguments and result), after the start (readyOps). */
  *forwardProgram(...args: ProgramArgs<M['forwardProgram']>): Program<ProgramResult<M['forwardProgram']>> {
    yield* this.readyOps();
    return (yield* (this.module.forwardOps as AnyProgramFn).apply(this.module, args)) as ProgramResult<M['forwardProgram']>;
  }

  /** The wrapped model's backward (same arguments and result), with the gradients averaged over the ranks. */
  *backwardProgram(...args: ProgramArgs<M['backwardProgram']>): Program<ProgramResult<M['backwardProgram']>> {
    const sync = this.sync;
    const inner = (this.module.backwardOps as AnyProgramFn).apply(this.module, args) as Program<ProgramResult<M['backwardProgram']>>;
    if (!sync) return yield* inner;
    const t0 = performance.now(), comm0 = distributed.commSeconds();
    for (const p of this.gradParams) p.gradData(); // every rank reduces every gradient (zero when unused)
    const byGrad = new Map<unknown, number>(this.gradParams.map((p, i) => [p.grad!.storage, i]));
    const bucketOf = new Int32Array(this.gradParams.length);
    this.buckets.forEach((b, k) => b.forEach((i) => (bucketOf[i] = k)));
    const lastTouch = new Int32Array(this.gradParams.length).fill(-1);
    const plan = this.overlap ? this.readyAfter : null;
    const pending: PendingCollective[] = [];
    const launch = (k: number) => pending.push(startAllReduce(this.buckets[k].map((i) => this.gradParams[i].grad!), 'mean', 'gradient all-reduce'));
    let opIndex = 0, raced = '';
    let step = inner.next();
    try {
      while (!step.done) {
        let error: { value: unknown } | null = null;
        try {
          yield step.value;
        } catch (e) {
          error = { value: e };
        }
        for (const v of Object.values(step.value.args)) {
          const i = byGrad.get(v);
          if (i === undefined) continue;
          lastTouch[i] = opIndex;
          if (bucketOf[i] < pending.length && !raced) raced = this.paramNames[i];
        }
        if (plan) while (pending.length < this.buckets.length && plan[pending.length] <= opIndex) launch(pending.length);
        opIndex++;
        step = error ? inner.throw(error.value) : inner.next();
      }
      this.stats.earlyBuckets += pending.length;
    } finally {
      // Buckets are launched in the same order on every rank; an interrupted backward still
      // launches the rest so that the ranks' collectives stay matched.
      while (pending.length < this.buckets.length) launch(pending.length);
    }
    this.stats.backwardSeconds += (performance.now() - t0) / 1000;
    yield* waitOps(pending, this.stats);
    this.stats.steps++;
    this.stats.commSeconds += distributed.commSeconds() - comm0;
    this.readyAfter = this.buckets.map((b) => Math.max(...b.map((i) => (lastTouch[i] < 0 ? Infinity : lastTouch[i]))));
    if (raced) {
      this.readyAfter = null;
      throw new NodeformerError('ERR_NF_STATE', `DistributedDataParallel: the gradient of ${raced} was written after its bucket's all-reduce ` +
        'had started (the backward program changed between steps); overlap is re-planned from this step');
    }
    return step.value;
  }

  /**
   * Runs fn with gradient synchronisation off: backwards inside accumulate locally. When fn returns
   * a Promise, synchronisation stays off until it settles (await the async calls inside it).
   */
  noSync<T>(fn: () => T): T {
    if (typeof fn !== 'function') invalidArg('fn', 'a function', fn);
    const before = this.sync;
    this.sync = false;
    let out: T;
    try {
      out = fn();
    } catch (e) {
      this.sync = before;
      throw e;
    }
    if (out instanceof Promise) return out.finally(() => (this.sync = before)) as T;
    this.sync = before;
    return out;
  }

  /** Zeroes the statistics. */
  resetStats(): void {
    Object.assign(this.stats, { steps: 0, commSeconds: 0, exposedSeconds: 0, backwardSeconds: 0, earlyBuckets: 0 });
  }

  // ---- pass-through to the wrapped model ----
  override runOps<T>(what: string, program: Program<T>): T {
    return this.module.runOps(what, program);
  }
  override enqueueOps<T>(program: () => Program<T>, ...others: Lane[]): Promise<T> {
    return this.module.enqueueOps(program, ...others);
  }
  override namedParameters(prefix = ''): [string, Parameter][] {
    return this.module.namedParameters(prefix);
  }
  override stateDict(): Record<string, Tensor<'float32'>> {
    return this.module.stateDict();
  }
  override loadStateDict(record: StateDict, options?: LoadStateDictOptions): void {
    this.module.loadStateDict(record, options);
  }
  override namedRngs(prefix = ''): [string, Random][] {
    return this.module.namedRngs(prefix);
  }
  override train(mode = true): this {
    this.module?.train(mode);
    return super.train(mode);
  }
  override eval(options: EvalOptions = {}): this {
    super.eval(options);
    this.module.eval(options);
    return this;
  }
  override modules(): Module[] {
    return this.module ? [this, ...this.module.modules()] : [this];
  }
  override to(device: Device): this {
    this.module.to(device);
    return this;
  }
  override dispose(): void {
    this.module.dispose();
    this.gathered.dispose();
  }
}
