/**
 * Module: the base of every layer and model. It owns named parameters and child modules (so
 * names compose as "blocks.0.attn.qkv.weight", the keys of stateDict()), the train/eval mode,
 * and gradient bookkeeping. Subclasses implement forward() and backward(); a forward call saves
 * what its backward needs on the module, so backward follows the forward it belongs to.
 */
import { invalidArg, NodeformerError } from './errors';
import { checkTensor, shapeSize, Tensor } from './tensor';

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

  /** The gradient buffer, created zero-filled on first use. */
  gradData(): Float32Array {
    if (!this.grad) this.grad = Tensor.zeros(this.shape, 'float32');
    return this.grad.data;
  }

  override dispose(): void {
    this.grad?.dispose();
    this.grad = null;
    super.dispose();
  }
}

/** A state dict: parameter name → tensor (or a Float32Array holding the values in row-major order). */
export type StateDict = Record<string, Tensor | Float32Array>;

export abstract class Module {
  private mode = true;
  private readonly params = new Map<string, Parameter>();
  private readonly children = new Map<string, Module>();

  /** Runs the module. */
  abstract forward(...args: never[]): unknown;
  /** Back-propagates the gradient of the last forward's output; accumulates into param.grad. */
  abstract backward(gradOutput: never): unknown;

  /** Whether the module is in training mode (dropout active). */
  get training(): boolean {
    return this.mode;
  }

  /** Sets training mode on this module and its children (dropout only in training mode). */
  train(mode = true): this {
    this.mode = mode;
    for (const c of this.children.values()) c.train(mode);
    return this;
  }

  /** Evaluation mode: train(false). */
  eval(): this {
    return this.train(false);
  }

  protected addParameter(name: string, shape: readonly number[], values: Float32Array): Parameter {
    const p = Parameter.create(shape, values);
    this.params.set(name, p);
    return p;
  }

  protected addModule<M extends Module>(name: string, module: M): M {
    this.children.set(name, module);
    return module;
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
  loadStateDict(record: StateDict, options: { strict?: boolean } = {}): void {
    const strict = options.strict ?? true;
    if (record === null || typeof record !== 'object') invalidArg('record', 'an object of tensors', record);
    const own = new Map(this.namedParameters());
    const problems: string[] = [];
    const plan: [Parameter, Float32Array][] = [];
    for (const [name, p] of own) {
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
        plan.push([p, values instanceof Tensor ? (values.data as Float32Array) : values]);
      }
    }
    if (strict) for (const name of Object.keys(record)) if (!own.has(name)) problems.push(`unexpected ${name}`);
    if (problems.length)
      throw new NodeformerError('ERR_NF_STATE_DICT', `loadStateDict: ${problems.length} problem(s): ${problems.join('; ')}`);
    for (const [p, values] of plan) p.data.set(values);
  }

  /** Sets every parameter gradient to zero. */
  zeroGrad(): void {
    for (const p of this.parameters()) p.grad?.data.fill(0);
  }

  /** Frees every parameter and gradient; the module cannot be used afterwards. */
  dispose(): void {
    for (const p of this.parameters()) p.dispose();
  }
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
