/**
 * Optimizers over a model's parameters (PyTorch's AdamW and SGD, same formulas and defaults),
 * updating each parameter from its `grad` in native code, and gradient-norm clipping.
 */
import { OptimizerArenas } from './arena';
import { checkDeviceOps, cuda, supportsBf16, type DeviceBuffer } from '../core/device';
import { graphCapturing, GraphRunner, objectId, onReplay, stepValue, uncapturable, type StepValueFields } from '../core/graph';
import { invalidArg, NodeformerError, objectArg } from '../validation/errors';
import { checkFiniteArgs } from '../core/finite';
import type { Parameter } from '../core/module';
import { OptionKeys } from '../validation/options';
import { Lane, op, runSync, type OpName, type Program } from '../core/program';
import { Tensor, type Storage } from '../core/tensor';

function checkParams(params: unknown, name = 'params'): Parameter[] {
  if (!Array.isArray(params) || params.length === 0 || params.some((p) => !p || typeof p.gradData !== 'function'))
    invalidArg(name, 'a non-empty array of Parameters (model.parameters())', params);
  return params as Parameter[];
}

/**
 * A parameter group (torch's param_groups): parameters and the options that differ for them from
 * the optimizer's, e.g. `{ params: biases, weightDecay: 0 }`. A group's `lr` is its own, fixed (a
 * schedule sets the optimizer's `options.lr`, which the groups without an `lr` follow); `lrScale`
 * multiplies the group's learning rate either way (layer-wise decay, see paramGroups()).
 */
export type ParamGroup<O extends object = object> = { params: Parameter[]; lrScale?: number } & Partial<O>;

/** One parameter of an updateList: its size, storage, gradient, state buffers and bf16 copy to write (or null). */
export interface UpdateEntry {
  n: number;
  param: Storage<'float32'>;
  grad: Storage<'float32'>;
  buffers: Storage<'float32'>[];
  copy: Storage<'bfloat16'> | null;
}

/** A checked group: its parameters' indices in Optimizer.params, its option overrides and scale. */
interface Group<O> {
  readonly indices: readonly number[];
  overrides: Partial<O>;
  lrScale: number;
}

function num(name: string, v: unknown, min: number, max = Infinity): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min || v > max) invalidArg(name, `a number in [${min}, ${max}]`, v);
  return v;
}

/** The resumable state of an optimizer: its class, options and each parameter's step count and buffers. */
export interface OptimizerState {
  /** The optimizer's class name ('AdamW', 'SGD'); loadStateDict checks it when present. */
  type?: string;
  options: Record<string, unknown>;
  /** Each parameter group's overrides and lrScale (absent: one group without overrides). */
  groups?: Record<string, unknown>[];
  state: { step: number; buffers: Float32Array[] }[];
}
const STATE_KEYS = new OptionKeys<OptimizerState>('optimizer state', { type: true, options: true, groups: true, state: true });
const STATE_ENTRY_KEYS = new OptionKeys<OptimizerState['state'][number]>('optimizer state entry', { step: true, buffers: true });

/**
 * The base of AdamW and SGD: per-parameter step counts and state buffers. On the CPU the
 * parameters, their gradients and each state buffer live in flat arenas (lib/training/arena.ts), so zeroGrad
 * is one native `zero` op and a step one update op over all parameters; elsewhere (or after a
 * parameter left its arena and has not come back to the CPU) each parameter is updated on its own.
 * Every parameter gets a gradient (zero until a backward writes it), so a parameter no backward
 * reaches is still updated from a zero gradient, as torch with zero_grad(set_to_none=False).
 * Frozen parameters (requiresGrad false) are skipped; parameter groups (ParamGroup) give parts of
 * the model their own options, one update op per group.
 */
export abstract class Optimizer<O extends object = object> {
  /**
   * The native ops this class's own code runs (zeroGrad, clipGradNorm; a subclass adds its step's):
   * the constructor checks that every parameter's device has a kernel for each (lib/core/device.ts declaredOps).
   */
  static readonly ops: readonly OpName[] = ['zero', 'clipGradNorm', 'sumSquares', 'copyRows', 'scale', 'clipCoefficient', 'clipScale'];

  readonly params: Parameter[];
  /** Options in force; change `options.lr` to schedule the learning rate. */
  options: O;
  protected steps: number[];
  protected buffers: Tensor<'float32'>[][];
  /** The parameter groups (one, without overrides, when the constructor got a plain array). */
  private readonly groups: Group<O>[];
  private arenas: OptimizerArenas | null = null;
  /** @internal trainStep calls that added gradients since the last update (trainStep's accumulate option). */
  accumulated = 0;
  /** @internal The queue of this optimizer's asynchronous calls (trainStepAsync joins it). */
  readonly lane = new Lane();
  /** @internal The CUDA graphs of training steps with this optimizer (lib/training/train.ts). */
  readonly graphs = new GraphRunner();

  constructor(params: Parameter[] | ParamGroup<O>[], options: O, buffersPerParam: number) {
    this.options = options;
    const isGroups = Array.isArray(params) && params.length > 0 && params.every((g) => g && typeof g === 'object' && 'params' in g);
    const raw: ParamGroup<O>[] = isGroups ? (params as ParamGroup<O>[]) : [{ params: checkParams(params) } as ParamGroup<O>];
    this.params = [];
    this.groups = raw.map((g, k) => {
      const name = isGroups ? `params[${k}]` : 'params';
      const { params: ps, lrScale = 1, ...overrides } = objectArg(name, g);
      const start = this.params.length;
      this.params.push(...checkParams(ps, isGroups ? `${name}.params` : 'params'));
      num(`${name}.lrScale`, lrScale, 0);
      this.checkOptions({ ...this.options, ...(overrides as Partial<O>) }, name);
      return { indices: ps.map((_, i) => start + i), overrides: overrides as Partial<O>, lrScale };
    });
    if (new Set(this.params).size !== this.params.length) invalidArg('params', 'each parameter in one group only (as torch)', params);
    for (const device of new Set(this.params.map((p) => p.device))) checkDeviceOps(device, [this], this.constructor.name);
    this.steps = this.params.map(() => 0);
    this.buffers = this.params.map((p) => Array.from({ length: buffersPerParam }, () => Tensor.zeros([p.size], 'float32', p.device)));
    this.flat();
  }

  /** The indices of the parameters a step updates (requiresGrad), in order. */
  private trainable(): number[] {
    return this.params.flatMap((p, i) => (p.requiresGrad ? [i] : []));
  }

  /**
   * The arenas of the trainable parameters `live` (Optimizer.params indices), rebuilt (one copy of
   * each parameter, gradient and state buffer) when a tensor has left its slice or the trainable set
   * changed and all are on the CPU; null while some parameter is on another device.
   */
  private flat(live = this.trainable()): OptimizerArenas | null {
    const ps = live.map((i) => this.params[i]), bs = live.map((i) => this.buffers[i]);
    if (this.arenas?.holds(ps, bs)) return this.arenas;
    // (An old arena is freed when the last of its tensors is copied out of it below.)
    return (this.arenas = live.length ? OptimizerArenas.build(ps, bs) : null);
  }

  /** The options of group `g` in force now (the optimizer's, the group's overrides, its lrScale). */
  protected groupOptions(g: Group<O>): O {
    const o = { ...this.options, ...g.overrides } as O & { lr: number };
    o.lr *= g.lrScale;
    return o;
  }

  /**
   * @internal What a captured step of this optimizer depends on besides shapes: the options but the
   * learning rate (a step value), the groups, and the storage of every parameter, gradient and state
   * buffer (a move changes it).
   */
  graphKey(): string {
    const { lr: _lr, ...rest } = this.options as O & { lr: number };
    const storages = this.params.flatMap((p, i) => [p.storage, p.grad?.storage, ...this.buffers[i].map((b) => b.storage)]);
    return JSON.stringify([rest, this.groups.map((g) => [g.overrides, g.lrScale]), this.params.map((p) => p.requiresGrad)]) + '|' +
      storages.map((s) => (s && typeof s === 'object' ? objectId(s) : '-')).join(',');
  }

  /** Sets every parameter gradient to zero. */
  zeroGrad(): void {
    this.lane.checkIdle(`${this.constructor.name}.zeroGrad`);
    runSync(this.zeroGradOps());
  }

  /** The program of zeroGrad: one native `zero` over the gradient arena (one per gradient off the CPU). */
  *zeroGradOps(): Program<void> {
    const live = this.trainable(), flat = this.flat(live);
    if (flat) yield* op('zero', { n: flat.size, x: flat.grads.arena.storage });
    else for (const i of live) if (this.params[i].grad) yield* op('zero', { n: this.params[i].size, x: this.params[i].grad!.storage });
  }

  /** One update of every parameter that has a gradient. */
  step(): void {
    this.lane.checkIdle(`${this.constructor.name}.step`);
    runSync(this.stepOps());
  }

  /**
   * step() with the updates on worker threads; calls on one optimizer run in order. (To step
   * right after a model's asynchronous backward, use trainStepAsync, which queues both together.)
   */
  stepAsync(): Promise<void> {
    return this.lane.enqueue(() => this.stepOps());
  }

  /**
   * @internal The program of clipGradNorm over this optimizer's trainable parameters: one fused
   * clipGradNorm op over the gradient arena when there is one (CPU only: not among OPTIMIZER_ENTRIES,
   * the CUDA path is clipGradNormOps's). Returns the total norm.
   */
  *clipGradsOps(maxNorm: number, readNorm = true): Program<number> {
    const live = this.trainable(), flat = this.flat(live);
    if (!flat) return yield* clipGradNormOps(live.map((i) => this.params[i]), maxNorm, readNorm);
    num('maxNorm', maxNorm, 0);
    const total = Tensor.empty([1], 'float32');
    try {
      yield* op('clipGradNorm', { n: flat.size, grad: flat.grads.arena.storage, maxNorm, totalNorm: total.storage });
      return total.data[0];
    } finally {
      total.dispose();
    }
  }

  /** The program of step(). */
  *stepOps(): Program<void> {
    for (let i = 0; i < this.params.length; i++) {
      if (this.params[i].disposed) throw new NodeformerError('ERR_NF_DISPOSED', `optimizer parameter ${i} has been disposed`);
      // Under checkFinite, every gradient is scanned before any parameter changes.
      checkFiniteArgs({ [`the gradient of optimizer parameter ${i}`]: this.params[i].grad });
    }
    const live = this.trainable(), flat = this.flat(live);
    // The arenas take one update per group, which writes no bf16 weight copy: where a parameter has one
    // that the update op can write (precision 'bf16' on the CPU), the per-parameter lists below run instead.
    if (flat && live.every((i) => this.steps[i] === this.steps[live[0]]) && !live.some((i) => this.writesCopy(this.params[i]))) {
      const step = this.steps[live[0]] + 1;
      for (const i of live) this.steps[i] = step;
      // Each group's trainable parameters are one contiguous range of the arenas (live is in group order).
      const at = new Map(live.map((i, k) => [i, k]));
      for (const g of this.groups) {
        const ks = g.indices.filter((i) => at.has(i)).map((i) => at.get(i)!);
        if (ks.length === 0) continue;
        const [from, to] = flat.range(ks[0], ks[ks.length - 1]);
        const slice = (a: Tensor<'float32'>) => a.data.subarray(from, to); // (the arenas are CPU memory)
        yield* this.update(to - from, slice(flat.params.arena), slice(flat.grads.arena), flat.state.map((s) => slice(s.arena)), step, this.groupOptions(g));
      }
      for (const i of live) this.params[i].markWritten(); // (what is derived from them, such as prepacked weights, is stale)
      return;
    }
    // Off the arenas (on 'cuda', or with bf16 copies to write): one updateList per group and step count
    // (the parameters of a group normally share one) and device.
    const isLive = new Set(live);
    for (const g of this.groups) {
      const lists = new Map<string, number[]>();
      for (const i of g.indices) {
        const p = this.params[i];
        if (!isLive.has(i) || !p.grad) continue;
        const key = `${this.steps[i]}|${p.device}`;
        if (!lists.has(key)) lists.set(key, []);
        lists.get(key)!.push(i);
      }
      for (const list of lists.values()) yield* this.stepList(g, list);
    }
  }

  /** The program of one step of parameters `list` (indices; one group, one step count, one device). */
  private *stepList(g: Group<O>, list: number[]): Program<void> {
    const ps = list.map((i) => this.params[i]);
    // State made before the model moved (module.to) follows its parameter.
    for (const i of list) for (const b of this.buffers[i]) b.moveTo(this.params[i].device);
    // The step count and learning rate are step values (lib/core/graph.ts): a CUDA graph's replays draw them again.
    const o = this.groupOptions(g) as O & { lr: number }, next = this.steps[list[0]] + 1;
    const step = stepValue('stepAt', () => {
      const t = this.steps[list[0]] + 1;
      for (const i of list) this.steps[i] = t;
      return t;
    }, next);
    const lr = stepValue('lrAt', () => (this.groupOptions(g) as O & { lr: number }).lr, o.lr);
    // (A device without a bf16 kernel of the update leaves the copies stale, recast when next read.)
    const copies = ps.map((p) => (this.writesCopy(p) ? p.bf16CopyTarget() : null));
    yield* this.updateList(ps.map((p, k) => ({ n: p.size, param: p.storage, grad: p.grad!.storage,
      buffers: this.buffers[list[k]].map((b) => b.storage), copy: copies[k] })), step.value, { ...o, lr: lr.value }, { ...step.fields, ...lr.fields });
    const written = () => ps.forEach((p, k) => {
      p.markWritten();
      if (copies[k]) p.bf16Written();
    });
    // (Under capture nothing has run yet: each replay marks them once it is queued.)
    if (graphCapturing()) {
      for (const p of ps) p.markWritten();
      onReplay({ after: written });
    } else {
      written();
    }
  }

  /**
   * The op with which updateList writes the parameters' bf16 copies it is given (AdamW's
   * adamwMultiStep), where the device has its bf16 kernel (CUDA and the CPU); otherwise (null, or no
   * such kernel) they are left stale, to be recast when next read.
   */
  protected readonly writesCopiesWith: OpName | null = null;

  /** Whether this optimizer's update writes p's bf16 copy (p has one, and the device's update op a bf16 kernel). */
  private writesCopy(p: Parameter): boolean {
    const w = this.writesCopiesWith;
    return w !== null && p.bf16CopyTarget() !== null && supportsBf16(w, p.device);
  }

  /**
   * The program updating a list of parameters (one group, one step): by default update() on each;
   * a subclass may do the whole list in one op (AdamW's adamwMultiStep).
   */
  protected *updateList(list: UpdateEntry[], step: number, o: O, stepFields: StepValueFields): Program<void> {
    for (const e of list) yield* this.update(e.n, e.param, e.grad, e.buffers, step, o, stepFields);
  }

  /**
   * The program updating `n` parameter values from their gradients and state buffers at `step`, with
   * options `o`; `stepFields` (under CUDA graph capture) make the op read the step and learning rate
   * from the step table instead.
   */
  protected abstract update(n: number, param: Storage<'float32'>, grad: Storage<'float32'>, buffers: Storage<'float32'>[], step: number, o: O,
    stepFields?: StepValueFields): Program<void>;

  /** A copy of the options, the groups' overrides (when there are groups), step counts and buffers (for checkpoints). */
  stateDict(): OptimizerState {
    const plain = this.groups.length === 1 && this.groups[0].lrScale === 1 && Object.keys(this.groups[0].overrides).length === 0;
    return { type: this.constructor.name, options: { ...this.options } as Record<string, unknown>,
      ...(plain ? {} : { groups: this.groups.map((g) => ({ ...g.overrides, lrScale: g.lrScale })) }),
      state: this.params.map((_, i) => ({ step: this.steps[i], buffers: this.buffers[i].map((b) => b.toArray()) })) };
  }

  /** Checks the options of the optimizer (names prefixed with `prefix`), returning them complete. */
  protected abstract checkOptions(options: Partial<O>, prefix: string): O;

  /** Restores a stateDict() of an optimizer over parameters of the same sizes (validated first). */
  loadStateDict(s: OptimizerState): void {
    this.lane.checkIdle(`${this.constructor.name}.loadStateDict`);
    if (!s || !Array.isArray(s.state) || s.state.length !== this.params.length)
      invalidArg('state', `an optimizer state for ${this.params.length} parameters`, s);
    STATE_KEYS.check('state', s, `${this.constructor.name}.loadStateDict state`);
    if (s.type !== undefined && s.type !== this.constructor.name) invalidArg('state.type', `'${this.constructor.name}'`, s.type);
    const options = this.checkOptions({ ...this.options, ...objectArg('state.options', s.options as Partial<O>) }, 'state.options');
    if (s.groups !== undefined && (!Array.isArray(s.groups) || s.groups.length !== this.groups.length))
      invalidArg('state.groups', `the overrides of ${this.groups.length} parameter group(s)`, s.groups);
    const groups = (s.groups ?? []).map((g, k) => {
      const { lrScale = 1, ...overrides } = objectArg(`state.groups[${k}]`, g);
      num(`state.groups[${k}].lrScale`, lrScale, 0);
      this.checkOptions({ ...options, ...(overrides as Partial<O>) }, `state.groups[${k}]`);
      return { overrides: overrides as Partial<O>, lrScale: lrScale as number };
    });
    s.state.forEach((e, i) => {
      if (e !== null && typeof e === 'object') STATE_ENTRY_KEYS.check(`state.state[${i}]`, e, `state.state[${i}]`);
      if (!Number.isInteger(e?.step) || e.step < 0 || !Array.isArray(e.buffers) || e.buffers.length !== this.buffers[i].length ||
          e.buffers.some((b) => !(b instanceof Float32Array) || b.length !== this.params[i].size))
        invalidArg(`state.state[${i}]`, `a step count and ${this.buffers[i].length} Float32Array(s) of ${this.params[i].size} values`, e);
    });
    this.options = options;
    groups.forEach((g, k) => Object.assign(this.groups[k], g));
    s.state.forEach((e, i) => {
      this.steps[i] = e.step;
      e.buffers.forEach((b, j) => this.buffers[i][j].copyFrom(b));
    });
  }

  /**
   * Frees the optimizer's state buffers (native memory); the optimizer cannot step afterwards.
   * Throws ERR_NF_STATE while a stepAsync is pending.
   */
  dispose(): void {
    this.lane.checkIdle(`${this.constructor.name}.dispose`);
    for (const bs of this.buffers) for (const b of bs) b.dispose(); // (the state arenas go with their last slice)
    this.arenas = null;
    this.graphs.clear();
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}

export interface AdamWOptions {
  /** Learning rate (default 1e-3). */
  lr?: number;
  /** Decay rates of the moment estimates (default [0.9, 0.999]). */
  betas?: [number, number];
  /** Added to the denominator (default 1e-8). */
  eps?: number;
  /** Decoupled weight decay (default 1e-2), applied to every parameter as torch.optim.AdamW. */
  weightDecay?: number;
}

const ADAMW_OPTIONS = new OptionKeys<AdamWOptions>('AdamW options', { lr: true, betas: true, eps: true, weightDecay: true });

/** Checks AdamW options named `prefix` ('options', or 'state.options' in a state dict), returning them complete. */
function adamwOptions(raw: AdamWOptions, prefix: string): Required<AdamWOptions> {
  const o = ADAMW_OPTIONS.check(prefix, raw, `AdamW ${prefix}`);
  const betas = o.betas ?? [0.9, 0.999];
  if (!Array.isArray(betas) || betas.length !== 2) invalidArg(`${prefix}.betas`, 'two numbers in [0, 1)', betas);
  return {
    lr: num(`${prefix}.lr`, o.lr ?? 1e-3, 0),
    betas: [num(`${prefix}.betas[0]`, betas[0], 0, 0.999999999), num(`${prefix}.betas[1]`, betas[1], 0, 0.999999999)],
    eps: num(`${prefix}.eps`, o.eps ?? 1e-8, 0),
    weightDecay: num(`${prefix}.weightDecay`, o.weightDecay ?? 1e-2, 0),
  };
}

/** torch.optim.AdamW: decoupled weight decay, bias-corrected moments. */
export class AdamW extends Optimizer<Required<AdamWOptions>> {
  /** The ops it runs (Optimizer.ops). */
  static override readonly ops: readonly OpName[] = ['adamwStep', 'adamwMultiStep'];
  protected override readonly writesCopiesWith: OpName = 'adamwMultiStep';
  constructor(params: Parameter[] | ParamGroup<AdamWOptions>[], options: AdamWOptions = {}) {
    super(params, adamwOptions(options, 'options'), 2);
  }

  protected checkOptions(options: AdamWOptions, prefix: string): Required<AdamWOptions> {
    return adamwOptions(options, prefix);
  }

  protected *update(n: number, param: Storage<'float32'>, grad: Storage<'float32'>, [expAvg, expAvgSq]: Storage<'float32'>[], step: number,
    o: Required<AdamWOptions>, stepFields: StepValueFields = {}): Program<void> {
    yield* op('adamwStep', { n, step, lr: o.lr, beta1: o.betas[0], beta2: o.betas[1], eps: o.eps, weightDecay: o.weightDecay,
      ...stepFields, param, grad, expAvg, expAvgSq });
  }

  /** One adamwMultiStep over the list (on 'cuda' a few launches, not one per parameter), writing the bf16 copies given. */
  protected override *updateList(list: UpdateEntry[], step: number, o: Required<AdamWOptions>, stepFields: StepValueFields): Program<void> {
    const copies = list.some((e) => e.copy);
    yield* op('adamwMultiStep', { sizes: list.map((e) => e.n), step, lr: o.lr, beta1: o.betas[0], beta2: o.betas[1], eps: o.eps,
      weightDecay: o.weightDecay, ...stepFields, param: list.map((e) => e.param), grad: list.map((e) => e.grad),
      expAvg: list.map((e) => e.buffers[0]), expAvgSq: list.map((e) => e.buffers[1]),
      ...(copies ? { copy: list.map((e) => e.copy as Storage<'float32'> | null) } : {}) });
  }
}

export interface SGDOptions {
  /** Learning rate (default 1e-3). */
  lr?: number;
  /** Momentum factor (default 0). */
  momentum?: number;
  /** Dampening of the momentum (default 0). */
  dampening?: number;
  /** L2 penalty added to the gradient (default 0). */
  weightDecay?: number;
  /** Nesterov momentum (default false). */
  nesterov?: boolean;
}

const SGD_OPTIONS = new OptionKeys<SGDOptions>('SGD options', { lr: true, momentum: true, dampening: true, weightDecay: true, nesterov: true });

/** Checks SGD options named `prefix` ('options', or 'state.options' in a state dict), returning them complete. */
function sgdOptions(raw: SGDOptions, prefix: string): Required<SGDOptions> {
  const o = SGD_OPTIONS.check(prefix, raw, `SGD ${prefix}`);
  const checked = {
    lr: num(`${prefix}.lr`, o.lr ?? 1e-3, 0),
    momentum: num(`${prefix}.momentum`, o.momentum ?? 0, 0),
    dampening: num(`${prefix}.dampening`, o.dampening ?? 0, 0, 1),
    weightDecay: num(`${prefix}.weightDecay`, o.weightDecay ?? 0, 0),
    nesterov: o.nesterov ?? false,
  };
  if (typeof checked.nesterov !== 'boolean') invalidArg(`${prefix}.nesterov`, 'a boolean', checked.nesterov);
  if (checked.nesterov && (checked.momentum <= 0 || checked.dampening !== 0))
    invalidArg(`${prefix}.nesterov`, 'false unless momentum > 0 and dampening = 0 (as torch)', true);
  return checked;
}

/** torch.optim.SGD with momentum, dampening, weight decay and Nesterov momentum. */
export class SGD extends Optimizer<Required<SGDOptions>> {
  /** The ops it runs (Optimizer.ops). */
  static override readonly ops: readonly OpName[] = ['sgdStep'];
  constructor(params: Parameter[] | ParamGroup<SGDOptions>[], options: SGDOptions = {}) {
    super(params, sgdOptions(options, 'options'), 1);
  }

  protected checkOptions(options: SGDOptions, prefix: string): Required<SGDOptions> {
    return sgdOptions(options, prefix);
  }

  protected *update(n: number, param: Storage<'float32'>, grad: Storage<'float32'>, [momentumBuf]: Storage<'float32'>[], step: number,
    o: Required<SGDOptions>): Program<void> {
    uncapturable('SGD (its step count and learning rate are kernel arguments)');
    yield* op('sgdStep', { n, step, lr: o.lr, momentum: o.momentum, dampening: o.dampening, weightDecay: o.weightDecay,
      nesterov: o.nesterov, param, grad, momentumBuf: o.momentum !== 0 ? momentumBuf : null });
  }
}

/**
 * torch.nn.utils.clip_grad_norm_: scales every gradient by maxNorm / (total + 1e-6) when the
 * total L2 norm over all of them exceeds maxNorm. Returns the total norm before clipping. On
 * 'cuda' the whole clip stays on the device (clipCoefficient, clipScale: a NaN norm scales by NaN,
 * as torch) and only the norm is read back.
 */
export function clipGradNorm(params: Parameter[], maxNorm: number): number {
  return runSync(clipGradNormOps(params, maxNorm));
}

/**
 * The program of clipGradNorm. With `readNorm` false (a training step, which may be captured as a
 * CUDA graph) a clip on 'cuda' returns NaN instead of reading the norm back.
 */
export function* clipGradNormOps(params: Parameter[], maxNorm: number, readNorm = true): Program<number> {
  const ps = checkParams(params).filter((p) => p.grad);
  num('maxNorm', maxNorm, 0);
  // Each gradient's Σ g² (float32, as the op gives it) lands in slot i of a vector on its device.
  const onDevice = ps.length > 0 && ps.every((p) => p.grad!.device === 'cuda');
  const sums: { cpu?: Tensor<'float32'>; cuda?: Tensor<'float32'> } = {};
  const tmp: { cpu?: Tensor<'float32'>; cuda?: Tensor<'float32'> } = {};
  let sum = 0, coef: DeviceBuffer | null = null;
  try {
    for (let i = 0; i < ps.length; i++) {
      const g = ps[i].grad!, dev = g.device;
      const s = (sums[dev] ??= Tensor.empty([ps.length], 'float32', dev)), one = (tmp[dev] ??= Tensor.empty([1], 'float32', dev));
      yield* op('sumSquares', { n: g.size, out: one.storage, x: g.storage });
      yield* op('copyRows', { rows: 1, cols: 1, dst: s.storage, dstStride: 1, dstOffset: i, src: one.storage, srcStride: 1 });
    }
    if (onDevice) { // the slots added in order and the coefficient on the device; the norm lands in tmp
      coef = cuda().alloc(8, 'none');
      yield* op('clipCoefficient', { n: ps.length, maxNorm, totalNorm: tmp.cuda!.storage, coef, sums: sums.cuda!.storage });
      for (const p of ps) yield* op('clipScale', { n: p.size, x: p.grad!.storage, coef });
      return readNorm ? tmp.cuda!.toArray()[0] : NaN;
    }
    // Otherwise the vectors come to the host once, and the slots are added in parameter order.
    const host = { cpu: sums.cpu?.data, cuda: sums.cuda?.toArray() };
    for (let i = 0; i < ps.length; i++) sum += host[ps[i].grad!.device]![i];
  } finally {
    for (const t of [sums.cpu, sums.cuda, tmp.cpu, tmp.cuda]) t?.dispose();
    if (coef) cuda().free(coef);
  }
  const total = Math.sqrt(sum);
  const c = maxNorm / (total + 1e-6);
  if (c < 1) for (const p of ps) yield* op('scale', { n: p.size, x: p.grad!.storage, s: c });
  return total;
}
