/**
 * Module: the base of every layer and model. It owns named parameters and child modules (so
 * names compose as "blocks.0.attn.qkv.weight", the keys of stateDict()), the train/eval mode,
 * gradient bookkeeping, the random streams of dropout, and the intermediates of the last forward.
 * Subclasses write forward and backward once, as programs of native ops (forwardOps and
 * backwardOps, see lib/program.ts); the base class runs them synchronously (forward, backward)
 * or on worker threads (forwardAsync, backwardAsync). A forward saves what its backward needs on
 * the module, so backward follows the forward it belongs to.
 */
import { checkDevice, checkDeviceOps, type Device } from './device';
import { invalidArg, NodeformerError } from './errors';
import { OptionKeys } from './options';
import { Lane, runSync, type Program } from './program';
import type { Random } from './random';
import { Scope } from './scope';
import { assertFinite, assertFiniteIn, checkFiniteEnabled, parameterNames } from './finite';
import { checkTensor, shapeSize, Tensor } from './tensor';

/** The argument list of a program-returning method. */
export type ProgramArgs<F> = F extends (...args: infer A) => Program<unknown> ? A : never;
/** The result of a program-returning method. */
export type ProgramResult<F> = F extends (...args: never[]) => Program<infer R> ? R : never;
type AnyProgramFn = (...args: unknown[]) => Program<unknown>;

/** A trainable tensor; `grad` is allocated (zero) by the first backward that reaches it. */
export class Parameter extends Tensor<'float32'> {
  grad: Tensor<'float32'> | null = null;

  /** A parameter of the given shape holding a copy of `values`. */
  static create(shape: readonly number[], values: Float32Array): Parameter {
    const size = shapeSize(shape);
    if (values.length !== size) invalidArg('values', `${size} values for shape [${shape.join(', ')}]`, values);
    const p = new Parameter('float32', shape, size);
    p.data.set(values);
    return p;
  }

  /** The gradient's storage (what ops take, see Tensor.storage), created zero-filled on the parameter's device on first use. */
  gradData(): Float32Array {
    if (!this.grad) this.grad = Tensor.zeros(this.shape, 'float32', this.device);
    return this.grad.storage;
  }

  /** Moves this parameter and its gradient to `device` in place (what Module.to does to every parameter). */
  moveTo(device: Device): void {
    this.moveStorage(checkDevice('device', device));
    const g = this.grad;
    if (g && g.device !== device) {
      this.grad = g.to(device);
      g.dispose();
    }
  }

  override dispose(): void {
    this.grad?.dispose();
    this.grad = null;
    super.dispose();
  }
}

/** A state dict: parameter name → tensor (or a Float32Array holding the values in row-major order). */
export type StateDict = Record<string, Tensor | Float32Array>;

type Method = (...args: never[]) => unknown;

/** Options of Module.eval. */
export interface EvalOptions {
  /** Forwards keep what a backward needs, so backward works with dropout off (default false). */
  keepActivations?: boolean;
}
const EVAL_OPTIONS = new OptionKeys<EvalOptions>('eval options', { keepActivations: true });

/** Options of Module.loadStateDict. */
export interface LoadStateDictOptions {
  /** Every parameter must be in the record and every record entry a parameter (default true). */
  strict?: boolean;
}
const LOAD_STATE_DICT_OPTIONS = new OptionKeys<LoadStateDictOptions>('loadStateDict options', { strict: true });

/** How many guarded module calls are running (checkFinite scans the parameters at depth 0 only). */
let guardDepth = 0;

export abstract class Module {
  private mode = true;
  private readonly params = new Map<string, Parameter>();
  private readonly children = new Map<string, Module>();
  private readonly rngs = new Map<string, Random>();
  private lane = new Lane();
  /**
   * Tensors this module made in its last forward for its backward (saved activations,
   * intermediates passed between children): freed when the next forward starts and by dispose().
   */
  protected readonly activations = new Scope();
  /** Whether the last forward kept its activations (training mode, or eval({ keepActivations })), so a backward may follow. */
  private backwardReady = false;
  /** Set by eval({ keepActivations: true }): forwards in eval mode keep what a backward needs. */
  private keepInEval = false;
  /** The module that registered this one with addModule, and this one's name there. */
  private owner: { module: Module; name: string } | null = null;
  private released = false;

  constructor() {
    // Every call of the subclass's forward and backward passes through guard(): the check that
    // the module is still alive, and the checkFinite scans (lib/finite.ts) when that mode is on.
    const self = this as unknown as Record<'forward' | 'backward', Method>;
    for (const method of ['forward', 'backward'] as const)
      Object.defineProperty(this, method, { value: this.guard(method, self[method]), writable: true, configurable: true });
    // Layers inside a model run through their programs (yield*), not forward(): under checkFinite
    // each program also scans its inputs and its result, so the first bad layer is named.
    for (const method of ['forward', 'backward'] as const) {
      const ops = (this as unknown as Record<string, ((...a: never[]) => Program<unknown>) | undefined>)[`${method}Ops`];
      if (typeof ops !== 'function') continue;
      const names = parameterNames(ops);
      const checked = function* (this: Module, ...args: never[]): Program<unknown> {
        if (method === 'backward' && !this.backwardReady)
          throw new NodeformerError('ERR_NF_STATE',
            `${this.modulePath}.backward called without a forward in training mode (a forward in eval mode keeps no activations; ` +
            'use eval({ keepActivations: true }) to backpropagate with dropout off)');
        const saves = this.savesActivations, finite = checkFiniteEnabled(), where = `${this.modulePath}.${method}`;
        if (finite) args.forEach((a, i) => assertFiniteIn(`${names[i] ?? `argument ${i}`} (input of ${where})`, a));
        const out = yield* ops.apply(this, args);
        if (finite) assertFiniteIn(`the output of ${where}`, out);
        if (method === 'forward') this.forwardDone(saves, out);
        return out;
      };
      Object.defineProperty(this, `${method}Ops`, { value: checked, writable: true, configurable: true });
    }
  }

  /** The forward pass as a program of native ops; forward and forwardAsync run it. */
  abstract forwardOps(...args: never[]): Program<unknown>;
  /** The backward pass as a program of native ops; backward and backwardAsync run it. */
  abstract backwardOps(...args: never[]): Program<unknown>;

  /** Runs the module on the calling thread (arguments and result: see the module's forwardOps). */
  forward<M extends Module>(this: M, ...args: ProgramArgs<M['forwardOps']>): ProgramResult<M['forwardOps']> {
    return this.runOps('forward', (this.forwardOps as AnyProgramFn)(...args)) as ProgramResult<M['forwardOps']>;
  }

  /**
   * Back-propagates the gradient of the last forward's output on the calling thread; accumulates
   * into param.grad and returns the input gradient (see the module's backwardOps).
   */
  backward<M extends Module>(this: M, ...args: ProgramArgs<M['backwardOps']>): ProgramResult<M['backwardOps']> {
    return this.runOps('backward', (this.backwardOps as AnyProgramFn)(...args)) as ProgramResult<M['backwardOps']>;
  }

  /**
   * forward with every op on a worker thread: the event loop stays free. Calls on one model (this
   * module and everything in its tree) run one after the other in call order; different models
   * run concurrently. Tensors passed in must stay undisposed until the Promise settles.
   */
  forwardAsync<M extends Module>(this: M, ...args: ProgramArgs<M['forwardOps']>): Promise<ProgramResult<M['forwardOps']>> {
    return this.enqueueOps(() => (this.forwardOps as AnyProgramFn)(...args)) as Promise<ProgramResult<M['forwardOps']>>;
  }

  /** backward with every op on a worker thread, queued behind this model's other calls (see forwardAsync). */
  backwardAsync<M extends Module>(this: M, ...args: ProgramArgs<M['backwardOps']>): Promise<ProgramResult<M['backwardOps']>> {
    return this.enqueueOps(() => (this.backwardOps as AnyProgramFn)(...args)) as Promise<ProgramResult<M['backwardOps']>>;
  }

  /**
   * Runs a program over this model on the calling thread. Throws ERR_NF_STATE while asynchronous
   * calls on the model are pending (they would interleave with it).
   */
  runOps<T>(what: string, program: Program<T>): T {
    this.lane.checkIdle(`${this.constructor.name}.${what}`);
    return runSync(program);
  }

  /**
   * Queues a program over this model behind its other asynchronous calls (and those of `others`,
   * other state the program uses) and runs it on worker threads.
   */
  enqueueOps<T>(program: () => Program<T>, ...others: Lane[]): Promise<T> {
    return this.lane.enqueue(program, ...others);
  }

  /** Whether the module is in training mode (dropout active). */
  get training(): boolean {
    return this.mode;
  }

  /** Sets training mode on this module and its children (dropout only in training mode). */
  train(mode = true): this {
    this.mode = mode;
    this.keepInEval = false;
    for (const c of this.children.values()) c.train(mode);
    return this;
  }

  /**
   * Evaluation mode: dropout off, and (unlike PyTorch's eval) inference only — each forward frees
   * its activations as it goes and a backward throws ERR_NF_STATE. With `keepActivations: true`
   * forwards keep what backward needs, to backpropagate with dropout off (saliency, input gradients).
   */
  eval(options: EvalOptions = {}): this {
    const { keepActivations = false } = EVAL_OPTIONS.check('options', options, `${this.constructor.name}.eval options`);
    if (typeof keepActivations !== 'boolean') invalidArg('options.keepActivations', 'a boolean', keepActivations);
    this.train(false);
    for (const m of this.modules()) m.keepInEval = keepActivations;
    return this;
  }

  /** Whether a forward now keeps the activations a backward needs (training mode, or eval({ keepActivations: true })). */
  protected get savesActivations(): boolean {
    return this.mode || this.keepInEval;
  }

  protected addParameter(name: string, shape: readonly number[], values: Float32Array): Parameter {
    const p = Parameter.create(shape, values);
    this.params.set(name, p);
    return p;
  }

  /**
   * Called when a forward program returns `out`: a backward may follow when the forward ran in
   * training mode; otherwise its activations are freed (forwardOps calls this itself; another
   * forward program of a module, such as LayerNorm.forwardResidual, calls it last).
   */
  protected forwardDone(saves: boolean, out: unknown): void {
    this.backwardReady = saves;
    this.dropActivations(...tensorsIn(out));
  }

  /**
   * In eval mode no backward follows a forward, so the activations kept so far (except `keep`)
   * are freed at once: every forward does this when it returns, and a model's forward between
   * its blocks, so inference holds one block's intermediates at a time.
   */
  protected dropActivations(...keep: (Tensor | null)[]): void {
    if (!this.savesActivations) this.activations.trim(...keep);
  }

  /** Registers a child; it joins this module's queue of asynchronous calls. */
  protected addModule<M extends Module>(name: string, module: M): M {
    this.children.set(name, module);
    (module as Module).owner = { module: this, name };
    module.joinLane(this.lane);
    return module;
  }

  private joinLane(lane: Lane): void {
    this.lane = lane;
    for (const c of this.children.values()) c.joinLane(lane);
  }

  /** Registers a random stream used at run time (dropout), so checkpoints can save and restore it. */
  protected addRng(name: string, rng: Random): Random {
    this.rngs.set(name, rng);
    return rng;
  }

  /** [name, random stream] pairs of this module and its children, depth first. */
  namedRngs(prefix = ''): [string, Random][] {
    const out: [string, Random][] = [];
    for (const [n, r] of this.rngs) out.push([prefix + n, r]);
    for (const [n, c] of this.children) out.push(...c.namedRngs(`${prefix}${n}.`));
    return out;
  }

  /** This module and its descendants, depth first. */
  modules(): Module[] {
    return [this, ...[...this.children.values()].flatMap((c) => c.modules())];
  }

  /** Where this module sits in its model, for messages: "ViTClassifier.blocks.0.attn" (the root's class name, then names). */
  get modulePath(): string {
    return this.owner ? `${this.owner.module.modulePath}.${this.owner.name}` : this.constructor.name;
  }

  /** Whether dispose() was called (on this module or on a module containing it). */
  get disposed(): boolean {
    return this.released;
  }

  /**
   * Wraps forward or backward. Every call checks the module was not disposed; under checkFinite
   * the outermost call (the model's, not its layers') also scans every parameter of the model
   * before a forward and every gradient after a backward, and each call scans its own inputs and
   * outputs, so the first non-finite tensor is named wherever it appears.
   */
  private guard(method: 'forward' | 'backward', fn: Method): Method {
    const ops = (this as unknown as Record<string, Method | undefined>)[`${method}Ops`];
    const names = parameterNames(ops ?? fn);
    return (...args: never[]) => {
      if (this.released) throw new NodeformerError('ERR_NF_DISPOSED', `${this.modulePath}.${method} called after dispose()`);
      for (const [name, p] of this.params)
        if (p.disposed)
          throw new NodeformerError('ERR_NF_DISPOSED', `${this.modulePath}.${method}: parameter ${this.modulePath}.${name} has been disposed`);
      return checkFiniteEnabled() ? this.checkedCall(method, fn, names, args) : fn.apply(this, args);
    };
  }

  /** A forward or backward call under checkFinite (see guard). */
  private checkedCall(method: 'forward' | 'backward', fn: Method, names: string[], args: never[]): unknown {
    const where = `${this.modulePath}.${method}`, prefix = `${this.modulePath}.`;
    const outermost = guardDepth === 0;
    args.forEach((a, i) => assertFiniteIn(`${names[i] ?? `argument ${i}`} (input of ${where})`, a));
    if (outermost && method === 'forward') for (const [name, p] of this.namedParameters()) assertFinite(`parameter ${prefix}${name}`, p);
    guardDepth++;
    let out: unknown;
    try {
      out = fn.apply(this, args);
    } finally {
      guardDepth--;
    }
    const after = (value: unknown) => {
      assertFiniteIn(`the output of ${where}`, value);
      if (outermost && method === 'backward')
        for (const [name, p] of this.namedParameters()) if (p.grad) assertFinite(`gradient ${prefix}${name}.grad`, p.grad);
      return value;
    };
    return out instanceof Promise ? out.then(after) : after(out);
  }

  /** [name, parameter] pairs, depth first in registration order. */
  namedParameters(prefix = ''): [string, Parameter][] {
    const out: [string, Parameter][] = [];
    for (const [n, p] of this.params) out.push([prefix + n, p]);
    for (const [n, c] of this.children) out.push(...c.namedParameters(`${prefix}${n}.`));
    return out;
  }

  parameters(): Parameter[] {
    return this.namedParameters().map(([, p]) => p);
  }

  /** The parameters by name (the tensors themselves, not copies). */
  stateDict(): Record<string, Tensor<'float32'>> {
    return Object.fromEntries(this.namedParameters());
  }

  /**
   * Copies values from `record` into the parameters. Every entry is checked before anything is
   * written, so a mismatch (missing or unexpected names with strict, wrong sizes or shapes)
   * throws ERR_NF_STATE_DICT listing all of them and leaves the module unchanged.
   */
  loadStateDict(record: StateDict, options: LoadStateDictOptions = {}): void {
    if (this.released) throw new NodeformerError('ERR_NF_DISPOSED', `${this.modulePath}.loadStateDict called after dispose()`);
    if (record === null || typeof record !== 'object') invalidArg('record', 'an object of tensors', record);
    const strict = LOAD_STATE_DICT_OPTIONS.check('options', options, `${this.constructor.name}.loadStateDict options`).strict ?? true;
    if (typeof strict !== 'boolean') invalidArg('options.strict', 'a boolean', strict);
    const own = new Map(this.namedParameters());
    const problems: string[] = [];
    const plan: [Parameter, Float32Array][] = [];
    for (const [name, p] of own) {
      if (p.disposed) problems.push(`${name}: the parameter has been disposed`);
      const v = record[name];
      if (v === undefined) {
        if (strict) problems.push(`missing ${name} [${p.shape.join(', ')}]`);
        continue;
      }
      const values = v instanceof Tensor ? v : v instanceof Float32Array ? v : null;
      if (!values) {
        problems.push(`${name}: expected a float32 Tensor or Float32Array`);
      } else if (values instanceof Tensor && (values.dtype !== 'float32' || values.disposed)) {
        problems.push(`${name}: expected a float32 Tensor but received ${values.disposed ? 'a disposed tensor' : values.dtype}`);
      } else if (values instanceof Tensor && values.shape.join(',') !== p.shape.join(',')) {
        problems.push(`${name}: shape [${values.shape.join(', ')}] does not match [${p.shape.join(', ')}]`);
      } else if (!(values instanceof Tensor) && values.length !== p.size) {
        problems.push(`${name}: ${values.length} values do not fit [${p.shape.join(', ')}]`);
      } else {
        plan.push([p, values instanceof Tensor ? (values.device === 'cpu' ? values.data : values.toArray()) as Float32Array : values]);
      }
    }
    if (strict) for (const name of Object.keys(record)) if (!own.has(name)) problems.push(`unexpected ${name}`);
    if (problems.length)
      throw new NodeformerError('ERR_NF_STATE_DICT', `loadStateDict: ${problems.length} problem(s): ${problems.join('; ')}`);
    for (const [p, values] of plan) p.copyFrom(values);
  }

  /** Sets every parameter gradient to zero. */
  zeroGrad(): void {
    for (const p of this.parameters()) p.grad?.fillZero();
  }

  /**
   * Moves every parameter (and gradient) of this module and its children to `device` in place, and
   * frees the saved activations of the last forward. Inputs must then be on the same device
   * (Tensor.to); an op mixing devices throws ERR_NF_DEVICE. 'cuda' throws ERR_NF_NO_CUDA when
   * nodeformer was built without CUDA, and ERR_NF_DEVICE (moving nothing) when the device has no
   * kernel for some op the model runs, naming them. An optimizer keeps its state on the device its
   * parameters had when it was made: create it after moving the model.
   */
  to(device: Device): this {
    checkDevice('device', device);
    checkDeviceOps(device, this.modules(), this.constructor.name);
    this.lane.checkIdle(`${this.constructor.name}.to`);
    if (this.released) throw new NodeformerError('ERR_NF_DISPOSED', `${this.modulePath}.to called after dispose()`);
    for (const m of this.modules()) m.activations.close();
    for (const p of this.parameters()) p.moveTo(device);
    return this;
  }

  /**
   * Frees the native memory of every parameter, gradient and saved activation in the tree; the
   * module cannot be used afterwards. Throws ERR_NF_STATE (freeing nothing) while asynchronous
   * calls on the model are pending.
   */
  dispose(): void {
    this.lane.checkIdle(`${this.constructor.name}.dispose`);
    for (const m of this.modules()) m.released = true;
    for (const m of this.modules()) m.activations.close();
    for (const p of this.parameters()) p.dispose();
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}

/** The tensors of a forward's result: the tensor itself, or the tensor fields of a result object. */
function tensorsIn(out: unknown): Tensor[] {
  if (out instanceof Tensor) return [out];
  return out && typeof out === 'object' ? Object.values(out).filter((v): v is Tensor => v instanceof Tensor) : [];
}

/** Checks a float32 input's last dimension and returns [rows, lastDim] (rows = product of the rest). */
export function rowsOf(name: string, x: unknown, lastDim: number, minRank = 2): [number, number] {
  const t = checkTensor(name, x, 'float32');
  const s = t.shape;
  if (s.length < minRank || s[s.length - 1] !== lastDim)
    invalidArg(name, `a float32 Tensor of rank >= ${minRank} whose last dimension is ${lastDim}`, t);
  return [t.size / lastDim, lastDim];
}

/** Throws ERR_NF_STATE when backward runs without a matching forward. */
export function requireSaved<T>(saved: T | null, module: string): T {
  if (!saved) throw new NodeformerError('ERR_NF_STATE', `${module}.backward called without a forward in training`);
  return saved;
}
