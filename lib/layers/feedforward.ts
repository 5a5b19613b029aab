import { stepValue, type StepValueFields } from '../core/graph';
import { requireSaved, rowsOf, Module } from '../core/module';
import { FeedForwardActivations, type FeedForwardActivation } from '../native/feedforward';
import { OptionKeys } from '../validation/options';
import { registerModelClass } from '../io/persist';
import { op, type OpName, type Program } from '../core/program';
import { Random } from '../core/random';
import { Scope } from '../core/scope';
import { checkActivation, emptyLike, Tensor, type Storage } from '../core/tensor';
import type { PlacementConfig } from '../core/device';
import { bool, oneOf, positiveInt, probability, seedOf, type Settings } from '../validation/values';
import { accumulate } from './dropout';
import { Linear } from './linear';

export type Activation = FeedForwardActivation;
/** The activations the native feed-forward op takes (its schema: native/ops/activation.h). */
export const ACTIVATIONS: readonly Activation[] = FeedForwardActivations;

export interface FeedForwardConfig extends PlacementConfig {
  dModel: number;
  /** Hidden width. */
  dFF: number;
  /** 'gelu' (erf, default), 'gelu_tanh', 'relu' or 'silu'. */
  activation?: Activation;
  /** Dropout on the hidden activation in training mode (default 0). */
  dropout?: number;
  /** Biases on fc1 and fc2 (default true; timm's proj_bias also switches them). */
  bias?: boolean;
  seed?: number;
}

const FEEDFORWARD_CONFIG = new OptionKeys<FeedForwardConfig>('FeedForward config',
  { dModel: true, dFF: true, activation: true, dropout: true, bias: true, seed: true, device: true, precision: true });

/**
 * y = fc2(dropout(act(fc1(x)))). Parameters: fc1.weight [F, D], fc1.bias [F], fc2.weight [D, F], fc2.bias [D]
 * (the biases only with `bias`: without, the ops get zeros and their bias gradients are dropped).
 * Under precision 'bf16', x, y and the saved hidden activations h, a are bfloat16 and the products read
 * the weights' bf16 copies (Parameter.storageFor); parameters and gradients stay float32. (On the CPU
 * only in training, where it saves them for the backward; its other layers keeping float32
 * activations, x is converted on the way in and y on the way out: Module.opsDType.)
 */
export class FeedForward extends Module {
  /** The ops it runs (Module.ops). */
  static override readonly ops: readonly OpName[] = ['feedforwardForward', 'feedforwardBackward'];
  readonly config: Settings<FeedForwardConfig>;
  readonly fc1: Linear;
  readonly fc2: Linear;
  private readonly dropRng: Random;
  private saved: { x: Tensor<'float32'>; h: Storage<'float32'> | null; a: Storage<'float32'>; seed: number; seedFields: StepValueFields; p: number } | null = null;

  constructor(config: FeedForwardConfig) {
    super();
    config = FEEDFORWARD_CONFIG.check('config', config);
    this.placeOn(config);
    const dModel = positiveInt('config.dModel', config.dModel);
    const dFF = positiveInt('config.dFF', config.dFF);
    this.config = {
      dModel, dFF, activation: oneOf('config.activation', config.activation ?? 'gelu', ACTIVATIONS),
      dropout: probability('config.dropout', config.dropout ?? 0), bias: bool('config.bias', config.bias ?? true),
      seed: seedOf(config.seed ?? 0),
    };
    const rng = new Random(this.config.seed), bias = this.config.bias;
    this.fc1 = this.addModule('fc1', new Linear({ inFeatures: dModel, outFeatures: dFF, bias, seed: rng.seed() }));
    this.fc2 = this.addModule('fc2', new Linear({ inFeatures: dFF, outFeatures: dModel, bias, seed: rng.seed() }));
    this.dropRng = this.addRng('dropout', new Random(rng.seed()));
  }

  /** A linear layer's bias storage, or (no bias) zeros [n] on x's device, freed with the activations. */
  private biasOf(l: Linear, like: Tensor, grad: boolean): Storage<'float32'> {
    if (l.bias) return grad ? l.bias.gradData() : l.bias.storage;
    return this.activations.add(Tensor.zeros([l.config.outFeatures], 'float32', like.device)).storage;
  }

  private dims(rows: number, p: number, seed: number, seedFields: StepValueFields) {
    return { rows, D: this.config.dModel, F: this.config.dFF, activation: this.config.activation, dropout: p, seed, offset: 0,
      ...seedFields, precision: this.precision };
  }

  /**
   * x [..., D] → y [..., D]; with `residual` (x's shape) y = fc2(...) + residual, a pre-LN block's
   * residual add: on the GPU it rides on fc2's product (cuBLASLt's C), no pass of its own.
   */
  *forwardProgram(x: Tensor, residual?: Tensor): Program<Tensor<'float32'>> {
    const [rows] = rowsOf('x', x, this.config.dModel, 1);
    const r = residual === undefined ? null : checkActivation('residual', residual, x.shape);
    const p = this.training ? this.config.dropout : 0;
    // (Under CUDA graph capture the seed is a step value, drawn again at every replay.)
    const { value: seed, fields: seedFields } = p > 0 ? stepValue('seedAt', () => this.dropRng.seed(), 0) : { value: 0, fields: {} };
    this.activations.close();
    const xa = this.asDType(x, this.opsDType()), dt = xa.dtype as 'float32', y = emptyLike(xa);
    const h = this.savesActivations ? this.activations.add(Tensor.empty([rows * this.config.dFF], dt, x.device)).storage : null;
    const a = this.activations.add(Tensor.empty([rows * this.config.dFF], dt, x.device)).storage;
    const W1Packed = yield* this.fc1.packedWeight(), W2Packed = yield* this.fc2.packedWeight();
    const fused = r !== null && r.dtype === dt;  // (else added after y's conversion to the activation dtype)
    yield* op('feedforwardForward', { ...this.dims(rows, p, seed, seedFields), y: y.storage, h, a, x: xa.storage,
      W1: this.fc1.weight.storageFor(dt), b1: this.biasOf(this.fc1, x, false), W2: this.fc2.weight.storageFor(dt),
      b2: this.biasOf(this.fc2, x, false), W1Packed, W2Packed,
      b1Rounded: this.roundedBias(this.fc1.bias, dt), b2Rounded: this.roundedBias(this.fc2.bias, dt),
      residual: fused ? r.storage : null });
    this.saved = { x: xa, h, a, seed, seedFields, p };
    const out = this.toActivation(y);
    return r !== null && !fused ? yield* accumulate(out, r) : out;
  }

  /** dy [..., D] → dx [..., D]; accumulates the parameter gradients. */
  *backwardProgram(dy: Tensor): Program<Tensor<'float32'>> {
    const s = requireSaved(this.saved, 'FeedForward'), dt = s.x.dtype as 'float32';
    checkActivation('dy', dy, s.x.shape);
    const tmp = new Scope(dy), dx = emptyLike(s.x), dya = tmp.add(dy.cast(dt));
    yield* op('feedforwardBackward', { ...this.dims(s.x.size / this.config.dModel, s.p, s.seed, s.seedFields), dx: dx.storage,
      dW1: this.fc1.weight.gradData(), db1: this.biasOf(this.fc1, s.x, true), dW2: this.fc2.weight.gradData(),
      db2: this.biasOf(this.fc2, s.x, true), dy: dya.storage, x: s.x.storage, h: requireSaved(s.h, 'FeedForward'), a: s.a,
      W1: this.fc1.weight.storageFor(dt), W2: this.fc2.weight.storageFor(dt) });
    tmp.close();
    return this.toActivation(dx);
  }
}
registerModelClass(FeedForward);
