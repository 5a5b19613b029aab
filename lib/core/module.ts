/**
 * Module: the base of every layer and model. It owns named parameters and child modules (so
 * names compose as "blocks.0.attn.qkv.weight", the keys of stateDict()), the device they live on,
 * the train/eval mode, gradient bookkeeping, the random streams of dropout, and the intermediates
 * of the last forward. Subclasses write forward and backward once, as programs of native ops
 * (forwardProgram and backwardProgram, see lib/core/program.ts); the base class runs them, checked,
 * synchronously (forward, backward), on worker threads (forwardAsync, backwardAsync) or inside a
 * parent's program (forwardOps, backwardOps). A forward saves what its backward needs on the
 * module, so backward follows the forward it belongs to.
 */
import {
  checkDevice, checkDeviceOps, checkPrecision, int8OnCuda, int8Training, supportsBf16, type Device, type PlacementConfig,
  type Precision,
} from './device';
import { invalidArg, NodeformerError } from '../validation/errors';
import { OptionKeys } from '../validation/options';
import { CapturedCall, captureInProgress, cudaGraphsEnabled, GraphRunner, objectId, onReplay, tensorKey, uncapturable } from './graph';
import { cuda, type DeviceBuffer } from './device';
import { Lane, runAsync, runSync, type OpName, type Program } from './program';
import type { Random } from './random';
import { Scope } from './scope';
import { assertFinite, assertFiniteIn, checkFiniteEnabled } from './finite';
import { checkActivation, shapeSize, Tensor, type FloatDType, type Storage } from './tensor';

/** The argument list of a program-returning method. */
export type ProgramArgs<F> = F extends (...args: infer A) => Program<unknown> ? A : never;
/** The result of a program-returning method. */
export type ProgramResult<F> = F extends (...args: never[]) => Program<infer R> ? R : never;
type AnyProgramFn = (...args: unknown[]) => Program<unknown>;

/** A trainable tensor; `grad` is allocated (zero) by the first backward that reaches it. */
export class Parameter extends Tensor<'float32'> {
  grad: Tensor<'float32'> | null = null;
  /**
   * Whether backward keeps this parameter's gradient and the optimizers update it (default true).
   * Frozen (false), it gets no `grad` and no optimizer state, and AdamW/SGD skip it; input gradients
   * still flow through its layer. (The fused backward kernels still compute its weight gradient, into
   * a scratch buffer that is never read.)
   */
  requiresGrad = true;
  private scratchGrad: Tensor<'float32'> | null = null;
  /** The bf16 copy the products of precision 'bf16' read (storageFor), and the version it was made from. */
  private bf16Copy: { tensor: Tensor<'bfloat16'>; version: number; capture: object | null } | null = null;

  /** A parameter of the given shape holding a copy of `values`, on `device` (default 'cpu'). */
  static create(shape: readonly number[], values: Float32Array, device: Device = 'cpu'): Parameter {
    const size = shapeSize(shape);
    if (values.length !== size) invalidArg('values', `${size} values for shape [${shape.join(', ')}]`, values);
    const p = new Parameter('float32', shape, size, checkDevice('device', device), true);
    p.copyFrom(values);
    return p;
  }

  /**
   * The gradient's storage (what ops take, see Tensor.storage), created zero-filled on the parameter's
   * device on first use; for a frozen parameter (requiresGrad false), a scratch buffer instead.
   */
  gradData(): Storage<'float32'> {
    if (!this.requiresGrad) {
      if (this.scratchGrad?.device !== this.device) {
        this.scratchGrad?.dispose();
        this.scratchGrad = Tensor.empty(this.shape, 'float32', this.device);
      }
      return this.scratchGrad.storage;
    }
    if (!this.grad) this.grad = Tensor.zeros(this.shape, 'float32', this.device);
    return this.grad.storage;
  }

  /**
   * What a matrix product over activations of `dtype` reads for this parameter: its own storage for
   * float32; for bfloat16 (precision 'bf16' on 'cuda': a bf16 GEMM takes both operands in bf16) a
   * bf16 copy of its values, cast again whenever they changed since (`version`: optimizer steps,
   * loads), as torch.autocast casts its weights. The copy (2 bytes a value) lives until the parameter
   * moves or is disposed; the parameter itself, its gradient and its optimizer state stay float32.
   * AdamW writes the copy in the pass that updates the parameter (adamwMultiStep's `copy`), and
   * then marks it fresh (bf16Written), so an optimizer step costs no recast.
   * A CUDA graph capture reads a copy that is fresh at capture time as it is, and every replay first
   * recasts it (eagerly, before the launch) if the parameter changed outside the graph since (a load,
   * a write from JS: the version moved); the graph's own AdamW keeps it fresh. A stale copy's cast is
   * recorded in the graph instead (at its first read), and every replay recasts it. A copy is never
   * stale when read.
   */
  storageFor(dtype: FloatDType): Storage<'float32'> {
    if (dtype === 'float32') return this.storage;
    const c = this.bf16Copy, capture = captureInProgress();
    if (c && c.version === this.version && c.capture === capture) return c.tensor.storage as Storage<'float32'>;
    if (c && capture && c.version === this.version && c.capture === null) {
      onReplay({ before: () => this.freshenBf16Copy() });
      c.capture = capture; // (read again in this capture as it is; eager reads after it recast until a replay's optimizer or freshen)
      return c.tensor.storage as Storage<'float32'>;
    }
    const tensor = this.cast('bfloat16', c?.tensor);
    this.bf16Copy = { tensor, version: this.version, capture };
    return tensor.storage as Storage<'float32'>;
  }

  /** Recasts the bf16 copy (in place, eagerly) unless it is fresh: before a replay of a graph that reads it. */
  private freshenBf16Copy(): void {
    const c = this.bf16Copy;
    if (!c || (c.version === this.version && c.capture === null)) return;
    this.cast('bfloat16', c.tensor);
    this.bf16Copy = { tensor: c.tensor, version: this.version, capture: null };
  }

  /** @internal The bf16 copy's storage for an optimizer step to write (adamwMultiStep's `copy`), or null when there is none. */
  bf16CopyTarget(): Storage<'bfloat16'> | null {
    return this.bf16Copy?.tensor.storage ?? null;
  }

  /** @internal After an op wrote the parameter (markWritten first) and its copy from the new values: the copy is fresh. */
  bf16Written(): void {
    if (this.bf16Copy) this.bf16Copy = { tensor: this.bf16Copy.tensor, version: this.version, capture: null };
  }

  /** Moves this parameter and its gradient to `device` in place (what Module.to does to every parameter). */
  override moveTo(device: Device): this {
    super.moveTo(device);
    this.grad?.moveTo(device);
    this.dropBf16Copy();
    return this;
  }

  private dropBf16Copy(): void {
    this.bf16Copy?.tensor.dispose();
    this.bf16Copy = null;
  }

  override dispose(): void {
    this.dropBf16Copy();
    this.grad?.dispose();
    this.grad = null;
    this.scratchGrad?.dispose();
    this.scratchGrad = null;
    super.dispose();
  }
}

/** A state dict: parameter name → tensor (or a Float32Array holding the values in row-major order). */
export type StateDict = Record<string, Tensor | Float32Array>;

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

/**
 * The base of every layer and model. A subclass writes its passes once, as programs of native ops:
 * `forwardProgram` and `backwardProgram` (see lib/core/program.ts). The base class's methods run them:
 *
 *   - forwardOps / backwardOps: the checked programs, what composite modules `yield*` (a block calls
 *     `yield* this.attn.forwardOps(h)`): a backward needs a forward that kept its activations
 *     (ERR_NF_STATE otherwise); under checkFinite the inputs and the result are scanned, naming the
 *     module's path; a forward's end records whether a backward may follow and, in eval mode, frees
 *     the activations;
 *   - forward / backward: a model call on the calling thread, and forwardAsync / backwardAsync with
 *     every op on worker threads: they check that the module is alive, and under checkFinite also
 *     scan every parameter before a forward and every gradient after a backward, around forwardOps /
 *     backwardOps.
 *
 * These are ordinary prototype methods: the method a reader sees is the method that runs.
 */
/** loadModel, given by lib/io/persist.ts, which builds on this file (so this file cannot import it). */
let modelLoader: ((path: string, cls: new (config: never) => Module) => Module) | null = null;

/** Gives Module.load its loader (lib/io/persist.ts's loadModel); called once, where loadModel is defined. */
export function setModelLoader(load: (path: string, cls: new (config: never) => Module) => Module): void {
  modelLoader = load;
}

export abstract class Module {
  /**
   * The native ops this class's own code runs (its passes, generation, and the helpers they call;
   * not its children's, which declare their own): Module.to checks that the device has a kernel for
   * every op the classes of the module tree declare, each class adding to those of the classes it
   * extends (lib/core/device.ts declaredOps). test/ops_schema.test.ts holds the declarations to what runs.
   */
  static readonly ops: readonly OpName[] = [];

  /**
   * Restores a model of this class (`ViTClassifier.load(path)`) from a file written by saveModel,
   * saveCheckpoint, fit's modelCheckpoint or the command line: loadModel(path, ThisClass)
   * (lib/io/persist.ts, which gives Module its loader: see setModelLoader).
   */
  static load<M extends Module>(this: new (config: never) => M, path: string): M {
    if (!modelLoader) throw new NodeformerError('ERR_NF_STATE', 'Module.load: no model loader (import nodeformer, not one of its files)');
    return modelLoader(path, this) as M;
  }

  private mode = true;
  private readonly params = new Map<string, Parameter>();
  private readonly buffers = new Map<string, Parameter>();
  private readonly children = new Map<string, Module>();
  private readonly rngs = new Map<string, Random>();
  private lane = new Lane();
  /** The CUDA graphs of this module's eval-mode forwards (lib/core/graph.ts). */
  private readonly forwardGraphs = new GraphRunner();
  /** Where this module's parameters are created (config.device, or the last to()). */
  private home: Device = 'cpu';
  /** How this module's matrix products run (config.precision, or the last setPrecision()). */
  private prec: Precision = 'fp32';
  /**
   * Tensors this module made in its last forward for its backward (saved activations,
   * intermediates passed between children): freed when the next forward starts, which then reuses
   * their memory for its own (lib/core/recycle.ts), and by dispose().
   */
  protected readonly activations = new Scope();
  /** Whether the last forward kept its activations (training mode, or eval({ keepActivations })), so a backward may follow. */
  private backwardReady = false;
  /** Set by eval({ keepActivations: true }): forwards in eval mode keep what a backward needs. */
  private keepInEval = false;
  /** The module that registered this one with addModule, and this one's name there. */
  private owner: { module: Module; name: string } | null = null;
  private released = false;

  /**
   * The forward pass as written by the subclass: a program of native ops, unchecked. Implement it;
   * call forwardOps (or forward, forwardAsync), which run it with the checks.
   */
  abstract forwardProgram(...args: never[]): Program<unknown>;
  /** The backward pass as written by the subclass (unchecked); implement it, call backwardOps. */
  abstract backwardProgram(...args: never[]): Program<unknown>;

  /**
   * The forward pass as a checked program (arguments and result: see the module's forwardProgram):
   * what composite modules run their children with (`yield* child.forwardOps(x)`).
   */
  *forwardOps<M extends Module>(this: M, ...args: ProgramArgs<M['forwardProgram']>): Program<ProgramResult<M['forwardProgram']>> {
    const self = this as Module;
    const saves = self.savesActivations, finite = checkFiniteEnabled();
    self.backwardReady = false; // until it returns: the activations of a forward that throws are not a backward's
    if (finite) self.checkInputs('forward', args);
    let out: unknown;
    try {
      out = yield* (self.forwardProgram as AnyProgramFn).apply(self, args);
    } catch (e) {
      self.releaseAfterFailure();
      throw e;
    }
    if (finite) assertFiniteIn(`the output of ${self.modulePath}.forward`, out);
    self.forwardDone(saves, out);
    return out as ProgramResult<M['forwardProgram']>;
  }

  /** The backward pass as a checked program (see backwardProgram); throws ERR_NF_STATE without a forward that kept its activations. */
  *backwardOps<M extends Module>(this: M, ...args: ProgramArgs<M['backwardProgram']>): Program<ProgramResult<M['backwardProgram']>> {
    const self = this as Module;
    self.checkTrainable(`${self.modulePath}.backward`);
    if (!self.backwardReady)
      throw new NodeformerError('ERR_NF_STATE',
        `${self.modulePath}.backward called without a forward in training mode (a forward in eval mode keeps no activations; ` +
        'use eval({ keepActivations: true }) to backpropagate with dropout off)');
    const finite = checkFiniteEnabled();
    if (finite) self.checkInputs('backward', args);
    let out: unknown;
    try {
      out = yield* (self.backwardProgram as AnyProgramFn).apply(self, args);
    } catch (e) {
      // Out of device memory partway, some gradients have accumulated and others not: only a new
      // forward and backward are right now, so what is kept for this one goes. (After an invalid
      // argument, found before any op runs, the backward may be called again.)
      if ((e as { code?: unknown } | null)?.code === 'ERR_NF_CUDA_OOM') self.releaseAfterFailure();
      throw e;
    }
    if (finite) assertFiniteIn(`the output of ${self.modulePath}.backward`, out);
    return out as ProgramResult<M['backwardProgram']>;
  }

  /**
   * After a forward of this module that threw (out of device memory, ERR_NF_CUDA_OOM, or any other
   * error), or a backward out of device memory: frees the activations this module and its children
   * kept, which no backward can use now (a new forward is needed), at once rather than when the next
   * forward starts, so that their memory is free for the next try (after ERR_NF_CUDA_OOM, a smaller
   * batch).
   */
  private releaseAfterFailure(): void {
    for (const m of this.modules()) {
      m.activations.close();
      m.backwardReady = false;
    }
  }

  /**
   * Runs the module on the calling thread (arguments and result: see the module's forwardProgram).
   * In eval mode on 'cuda', a forward that repeats with the same shapes runs as a CUDA graph
   * (lib/core/graph.ts); its result is a fresh tensor either way.
   */
  forward<M extends Module>(this: M, ...args: ProgramArgs<M['forwardProgram']>): ProgramResult<M['forwardProgram']> {
    const self = this as Module;
    const plan = self.planForward(args);
    const run = plan.how === 'eager' ? self.call('forward', args)
      : (function* () {
        return self.replayForward(plan.call ?? self.captureForward(args as unknown as Tensor[], plan.key), args as unknown as Tensor[], plan.key);
      })();
    return this.runOps('forward', run) as ProgramResult<M['forwardProgram']>;
  }

  /** How a forward runs: eagerly, or (eval mode on 'cuda', tensors only) captured or replayed as a CUDA graph. */
  private planForward(args: readonly unknown[]): { how: 'eager' } | { how: 'graph'; key: string; call?: CapturedCall } {
    if (!cudaGraphsEnabled() || this.savesActivations || this.home !== 'cuda' || checkFiniteEnabled() ||
        !args.every((a) => a instanceof Tensor && a.device === 'cuda')) return { how: 'eager' };
    const storages = this.parameters().map((p) => objectId(p.storage as object)).join(',');
    const key = `${tensorKey(args as Tensor[])}|${this.prec}|${storages}`;
    const next = this.forwardGraphs.next(key);
    return next === 'eager' ? { how: 'eager' } : next === 'capture' ? { how: 'graph', key } : { how: 'graph', key, call: next };
  }

  /** Captures the forward of `key`; the capture, or null (it runs eagerly from then on, the reason counted). */
  private captureForward(args: Tensor[], key: string): CapturedCall | null {
    const result = CapturedCall.capture(args, (own) => (function* (m: Module) {
      const out = yield* m.call('forward', own);
      if (!(out instanceof Tensor)) uncapturable('a forward that returns something other than one tensor');
      return [out as Tensor];
    })(this));
    this.forwardGraphs.captured(key, result);
    return typeof result === 'string' ? null : result;
  }

  /** A replay of `call` on `args` (an eager forward when there is no capture), its output copied into a new tensor. */
  private replayForward(call: CapturedCall | null, args: Tensor[], key: string): unknown {
    if (call?.launch(args)) return this.copyOutput(call);
    if (call) this.forwardGraphs.drop(key); // (stale: captured again after an eager run)
    return runSync(this.call('forward', args));
  }

  private copyOutput(call: CapturedCall): Tensor {
    const out = call.outputs[0], copy = Tensor.empty(out.shape, out.dtype, 'cuda');
    cuda().copy(copy.storage as DeviceBuffer, out.storage as DeviceBuffer);
    return copy;
  }

  /**
   * Back-propagates the gradient of the last forward's output on the calling thread; accumulates
   * into param.grad and returns the input gradient (see the module's backwardProgram).
   */
  backward<M extends Module>(this: M, ...args: ProgramArgs<M['backwardProgram']>): ProgramResult<M['backwardProgram']> {
    return this.runOps('backward', (this as Module).call('backward', args)) as ProgramResult<M['backwardProgram']>;
  }

  /**
   * forward with every op on a worker thread: the event loop stays free. Calls on one model (this
   * module and everything in its tree) run one after the other in call order; different models
   * run concurrently. Tensors passed in must stay undisposed until the Promise settles.
   */
  forwardAsync<M extends Module>(this: M, ...args: ProgramArgs<M['forwardProgram']>): Promise<ProgramResult<M['forwardProgram']>> {
    const self = this as Module;
    return this.enqueueTask(async () => {
      const plan = self.planForward(args);
      if (plan.how === 'eager') return runAsync(self.call('forward', args));
      const call = plan.call ?? self.captureForward(args as unknown as Tensor[], plan.key);
      if (call && (await call.launchAsync(args as unknown as Tensor[]))) return self.copyOutput(call);
      if (call) self.forwardGraphs.drop(plan.key);
      return runAsync(self.call('forward', args));
    }) as Promise<ProgramResult<M['forwardProgram']>>;
  }

  /** backward with every op on a worker thread, queued behind this model's other calls (see forwardAsync). */
  backwardAsync<M extends Module>(this: M, ...args: ProgramArgs<M['backwardProgram']>): Promise<ProgramResult<M['backwardProgram']>> {
    return this.enqueueOps(() => (this as Module).call('backward', args)) as Promise<ProgramResult<M['backwardProgram']>>;
  }

  /**
   * A model call (forward, backward and their Async twins): checks that the module and its
   * parameters are alive; under checkFinite scans every parameter of the model before a forward
   * and every gradient after a backward (the layers' own forwardOps / backwardOps scan their inputs
   * and outputs, so the first non-finite tensor is named wherever it appears).
   */
  private *call(method: 'forward' | 'backward', args: unknown[]): Program<unknown> {
    if (this.released) throw new NodeformerError('ERR_NF_DISPOSED', `${this.modulePath}.${method} called after dispose()`);
    for (const [name, p] of this.params)
      if (p.disposed)
        throw new NodeformerError('ERR_NF_DISPOSED', `${this.modulePath}.${method}: parameter ${this.modulePath}.${name} has been disposed`);
    const finite = checkFiniteEnabled(), prefix = `${this.modulePath}.`;
    if (finite && method === 'forward') {
      this.checkInputs(method, args); // the arguments first, then the parameters, then each layer
      for (const [name, p] of this.namedParameters()) assertFinite(`parameter ${prefix}${name}`, p);
    }
    const ops = (method === 'forward' ? this.forwardOps : this.backwardOps) as AnyProgramFn;
    const out = yield* ops.apply(this, args);
    if (finite && method === 'backward')
      for (const [name, p] of this.namedParameters()) if (p.grad) assertFinite(`gradient ${prefix}${name}.grad`, p.grad);
    return out;
  }

  /** Under checkFinite: scans the arguments of a forward or backward, named by position ("argument 1 (input of blocks.0.forward)"). */
  private checkInputs(method: 'forward' | 'backward', args: readonly unknown[]): void {
    args.forEach((a, i) => assertFiniteIn(`argument ${i + 1} (input of ${this.modulePath}.${method})`, a));
  }

  /**
   * Runs a program over this model on the calling thread. Throws ERR_NF_STATE while asynchronous
   * calls on the model are pending (they would interleave with it).
   */
  runOps<T>(what: string, program: Program<T>): T {
    this.checkIdle(what);
    return runSync(program);
  }

  /** Throws ERR_NF_STATE naming `what` while asynchronous calls on the model are pending. */
  protected checkIdle(what: string): void {
    this.lane.checkIdle(`${this.constructor.name}.${what}`);
  }

  /**
   * Queues a program over this model behind its other asynchronous calls (and those of `others`,
   * other state the program uses) and runs it on worker threads.
   */
  enqueueOps<T>(program: () => Program<T>, ...others: Lane[]): Promise<T> {
    return this.lane.enqueue(program, ...others);
  }

  /** @internal enqueueOps for any asynchronous task over the model (a CUDA graph's replay). */
  enqueueTask<T>(task: () => Promise<T>, ...others: Lane[]): Promise<T> {
    return this.lane.enqueueTask(task, ...others);
  }

  /** Whether the module is in training mode (dropout active). */
  get training(): boolean {
    return this.mode;
  }

  /** Sets training mode on this module and its children (dropout only in training mode). */
  train(mode = true): this {
    this.mode = mode;
    this.keepInEval = false;
    if (mode) this.dropInferenceCaches();
    if (mode) this.forwardGraphs.clear();
    for (const c of this.children.values()) c.train(mode);
    return this;
  }

  /**
   * Frees what this module keeps derived from its parameters for inference only (Linear's prepacked
   * weight, lib/core/prepack.ts). Module calls it on every module of the tree when the tree goes back to
   * training (train()), moves (to()) or is disposed; a subclass with such a cache overrides it.
   */
  protected dropInferenceCaches(): void {}

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

  /**
   * Where this module's parameters live: config.device (or 'cpu') until to() moves them. Read by
   * callers to put their inputs on the same device (`x.to(model.device)`).
   */
  get device(): Device {
    return this.home;
  }

  /**
   * How this module's matrix products run: config.precision (or 'fp32') until setPrecision() changes
   * it. The layers pass it to their ops (`precision: this.precision`).
   */
  get precision(): Precision {
    return this.prec;
  }

  /**
   * Throws ERR_NF_STATE naming `what` when this module or a child runs at precision 'int8' (inference
   * only): what backward, trainStep and fit check first.
   */
  checkTrainable(what: string): void {
    if (this.modules().some((m) => m.prec === 'int8')) int8Training(what);
  }

  /**
   * The dtype this module keeps its activations in: 'bfloat16' under precision 'bf16' on 'cuda' (half
   * the activation memory, as torch.autocast(dtype=torch.bfloat16); the design: native/cuda/bf16.cuh), else 'float32'.
   */
  get activationDType(): FloatDType {
    return this.prec === 'bf16' && this.home === 'cuda' ? 'bfloat16' : 'float32';
  }

  /**
   * `x` in this module's activation dtype (see activationDType): x itself, or a converted copy that
   * `scope` owns (default: this module's activations, freed by the next forward).
   */
  protected asActivation(x: Tensor, scope: Scope = this.activations): Tensor<'float32'> {
    return this.asDType(x, this.activationDType, scope);
  }

  /**
   * The dtype `ops` (the module's ops over its activations; default: every op its class declares) run
   * on: its activation dtype, or bfloat16 under precision 'bf16' where the forward saves activations for
   * a backward and the device runs bf16 activations in each of them (supportsBf16: on the CPU the
   * feed-forward and Linear ops), so that what waits for the backward takes half the bytes, as under
   * torch.autocast. Such a module converts at its boundary (its input in, its output back to the
   * activation dtype: asDType, toActivation); without a backward to wait for, those conversions cost
   * what the halved bytes save (CPU inference measured level), so it stays in its activation dtype.
   */
  protected opsDType(ops: readonly OpName[] = (this.constructor as typeof Module).ops): FloatDType {
    if (this.activationDType === 'bfloat16' || this.prec !== 'bf16' || !this.savesActivations) return this.activationDType;
    return ops.length > 0 && ops.every((op) => supportsBf16(op, this.home)) ? 'bfloat16' : 'float32';
  }

  /**
   * What a product's `<bias>Rounded` input takes for `bias` over activations of `dtype`: on 'cuda' under
   * bf16 activations the bias's bf16 copy (Parameter.storageFor, which AdamW keeps current), read by the
   * product's epilogue instead of rounding the bias again on every call (native/ops/precision.h); else null.
   */
  protected roundedBias(bias: Parameter | null, dtype: FloatDType): Storage<'float32'> | null {
    return bias && dtype === 'bfloat16' && this.home === 'cuda' ? bias.storageFor(dtype) : null;
  }

  /** `x` in `dtype`: x itself, or a converted copy that `scope` owns. */
  protected asDType(x: Tensor, dtype: FloatDType, scope: Scope = this.activations): Tensor<'float32'> {
    return (x.dtype === dtype ? x : scope.add(x.cast(dtype))) as Tensor<'float32'>;
  }

  /** An output of this module's ops in its activation dtype: y itself, or (y freed) a converted copy. */
  protected toActivation(y: Tensor<'float32'>): Tensor<'float32'> {
    if (y.dtype === this.activationDType) return y;
    const out = y.cast(this.activationDType as 'float32');
    y.dispose();
    return out;
  }

  /**
   * Sets the precision of this module and its children (see Precision in lib/core/device.ts). 'int8'
   * throws ERR_NF_DEVICE (changing nothing) while the module is on 'cuda'.
   * The parameters stay fp32.
   */
  setPrecision(precision: Precision): this {
    const p = checkPrecision('precision', precision);
    this.lane.checkIdle(`${this.constructor.name}.setPrecision`);
    if (this.released) throw new NodeformerError('ERR_NF_DISPOSED', `${this.modulePath}.setPrecision called after dispose()`);
    if (p === 'int8' && this.modules().some((m) => m.home === 'cuda')) int8OnCuda(`${this.constructor.name}.setPrecision`);
    for (const m of this.modules()) m.prec = p;
    return this;
  }

  /**
   * Sets the device the constructor creates this module's parameters (and buffers) on, and the
   * precision of its products, from config.device and config.precision; children added later take
   * both (addModule). Call it before addParameter.
   */
  protected placeOn(config: PlacementConfig): void {
    this.home = config.device === undefined ? 'cpu' : checkDevice('config.device', config.device);
    this.prec = config.precision === undefined ? 'fp32' : checkPrecision('config.precision', config.precision);
    if (this.prec === 'int8' && this.home === 'cuda') int8OnCuda(`${this.constructor.name} config (precision 'int8' on device 'cuda')`);
  }

  /** A trainable parameter `name` holding a copy of `values`, on this module's device. */
  protected addParameter(name: string, shape: readonly number[], values: Float32Array): Parameter {
    const p = Parameter.create(shape, values, this.home);
    this.params.set(name, p);
    return p;
  }

  /**
   * A constant tensor the module's ops read (a position table): it follows the module to its device
   * (to(), config.device) and is freed by dispose(), but is neither a parameter nor in stateDict().
   */
  protected addBuffer(name: string, shape: readonly number[], values: Float32Array): Tensor<'float32'> {
    const b = Parameter.create(shape, values, this.home);
    this.buffers.set(name, b);
    return b;
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

  /**
   * Registers a child; it joins this module's queue of asynchronous calls, moves to this module's
   * device and takes its precision (so config.device and config.precision reach every layer).
   */
  protected addModule<M extends Module>(name: string, module: M): M {
    this.children.set(name, module);
    (module as Module).owner = { module: this, name };
    module.joinLane(this.lane);
    if (module.precision !== this.prec) module.setPrecision(this.prec);
    if (module.device !== this.home) module.to(this.home);
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
        plan.push([p, values instanceof Tensor ? (values as Tensor<'float32'>).hostValues() : values]);
      }
    }
    if (strict) for (const name of Object.keys(record)) if (!own.has(name)) problems.push(`unexpected ${name}`);
    if (problems.length)
      throw new NodeformerError('ERR_NF_STATE_DICT', `loadStateDict: ${problems.length} problem(s): ${problems.join('; ')}`);
    for (const [p, values] of plan) p.copyFrom(values);
  }

  /**
   * Freezes (false) or unfreezes (true, the default) every parameter of this module and its children
   * (Parameter.requiresGrad), as torch's module.requires_grad_(). Returns this.
   */
  requiresGrad(flag = true): this {
    if (typeof flag !== 'boolean') invalidArg('flag', 'a boolean', flag);
    for (const p of this.parameters()) p.requiresGrad = flag;
    return this;
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
   * kernel for some op the model runs, naming them. An optimizer made before the move moves its state
   * to its parameters' device on its next step (creating it after moving the model saves that copy).
   */
  to(device: Device): this {
    checkDevice('device', device);
    if (device === 'cuda' && this.modules().some((m) => m.prec === 'int8')) int8OnCuda(`${this.constructor.name}.to('cuda')`);
    checkDeviceOps(device, this.modules(), this.constructor.name);
    this.lane.checkIdle(`${this.constructor.name}.to`);
    if (this.released) throw new NodeformerError('ERR_NF_DISPOSED', `${this.modulePath}.to called after dispose()`);
    for (const m of this.modules()) {
      m.activations.close();
      m.dropInferenceCaches();
      m.home = device;
      for (const b of m.buffers.values()) b.moveTo(device);
    }
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
    for (const m of this.modules()) {
      m.activations.close();
      m.dropInferenceCaches();
      m.forwardGraphs.clear();
      for (const b of m.buffers.values()) b.dispose();
    }
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

/**
 * Checks a layer input's last dimension and returns [rows, lastDim] (rows = product of the rest): a
 * float32 tensor, or bfloat16 (activations of precision 'bf16', checkActivation).
 */
export function rowsOf(name: string, x: unknown, lastDim: number, minRank = 2): [number, number] {
  const t = checkActivation(name, x);
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
