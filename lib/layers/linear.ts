import { uniformFanIn } from '../core/init';
import { requireSaved, rowsOf, Module, Parameter } from '../core/module';
import { OptionKeys } from '../validation/options';
import { registerModelClass } from '../io/persist';
import { PackedWeight } from '../core/prepack';
import { op, type OpName, type Program } from '../core/program';
import { Random } from '../core/random';
import { Scope } from '../core/scope';
import { checkActivation, emptyLike, Tensor } from '../core/tensor';
import type { PlacementConfig } from '../core/device';
import { bool, positiveInt, seedOf, type Settings } from '../validation/values';

export interface LinearConfig extends PlacementConfig {
  inFeatures: number;
  outFeatures: number;
  /** Whether to add a learned bias (default true). */
  bias?: boolean;
  /** Seed of the initialisation (default 0). */
  seed?: number;
}

const LINEAR_CONFIG = new OptionKeys<LinearConfig>('Linear config', { inFeatures: true, outFeatures: true, bias: true, seed: true, device: true, precision: true });

/**
 * y = x Wᵀ + b. Parameters: weight [out, in], bias [out] (torch.nn.Linear's layout and initialisation).
 * Under precision 'bf16', x and y are bfloat16 and the product reads the weight's bf16 copy
 * (Parameter.storageFor); the weight, the bias and their gradients stay float32. (On the CPU
 * only in training, where it saves them for the backward; its other layers keeping float32
 * activations, x is converted on the way in and y on the way out: Module.opsDType.)
 * In eval mode on the CPU it keeps its weight prepacked for the kernels (about the weight's size
 * again; lib/core/prepack.ts, setWeightPrepacking), rebuilt when the weight changes, freed by train().
 */
export class Linear extends Module {
  /** The ops it runs (Module.ops). */
  static override readonly ops: readonly OpName[] = ['linearForward', 'linearBackward', 'packWeights'];
  readonly config: Settings<LinearConfig>;
  readonly weight: Parameter;
  readonly bias: Parameter | null;
  private saved: Tensor<'float32'> | null = null;
  private readonly packed: PackedWeight;

  constructor(config: LinearConfig) {
    super();
    config = LINEAR_CONFIG.check('config', config);
    this.placeOn(config);
    const inFeatures = positiveInt('config.inFeatures', config.inFeatures);
    const outFeatures = positiveInt('config.outFeatures', config.outFeatures);
    this.config = { inFeatures, outFeatures, bias: bool('config.bias', config.bias ?? true), seed: seedOf(config.seed ?? 0) };
    const rng = new Random(this.config.seed);
    this.weight = this.addParameter('weight', [outFeatures, inFeatures], uniformFanIn(rng, outFeatures * inFeatures, inFeatures));
    this.bias = this.config.bias ? this.addParameter('bias', [outFeatures], uniformFanIn(rng, outFeatures, inFeatures)) : null;
    this.packed = new PackedWeight(this.weight);
  }

  /**
   * The program returning the weight prepacked for the CPU kernels (what the ops take as WPacked,
   * W1Packed, qkvWeightPacked, ...) at this module's precision, packed first when the weight, the ISA
   * variant or the precision changed since (at precision 'int8' the int8 packing, lib/core/prepack.ts);
   * null in training mode, on 'cuda' or with prepacking off. FeedForward and MultiHeadAttention pass
   * their Linears' packings to their fused ops.
   */
  *packedWeight(): Program<Float32Array | null> {
    return yield* this.packed.current(!this.training, this.precision);
  }

  protected override dropInferenceCaches(): void {
    this.packed.free();
  }

  /** x [..., in] → y [..., out]. */
  *forwardProgram(x: Tensor): Program<Tensor<'float32'>> {
    const [rows] = rowsOf('x', x, this.config.inFeatures, 1);
    this.activations.close();
    const xa = this.asDType(x, this.opsDType(['linearForward', 'linearBackward'])), y = emptyLike(xa, this.config.outFeatures);
    const WPacked = yield* this.packedWeight();
    yield* op('linearForward', { y: y.storage, x: xa.storage, W: this.weight.storageFor(xa.dtype), b: this.bias?.storage ?? null, rows,
      inFeatures: this.config.inFeatures, outFeatures: this.config.outFeatures, WPacked, precision: this.precision,
      bRounded: this.roundedBias(this.bias, xa.dtype) });
    this.saved = xa;
    return this.toActivation(y);
  }

  /** dy [..., out] → dx [..., in]; accumulates weight.grad (and bias.grad). */
  *backwardProgram(dy: Tensor): Program<Tensor<'float32'>> {
    const x = requireSaved(this.saved, 'Linear');
    checkActivation('dy', dy, [...x.shape.slice(0, -1), this.config.outFeatures]);
    const tmp = new Scope(dy), dx = emptyLike(x), dya = tmp.add(dy.cast(x.dtype as 'float32'));
    yield* op('linearBackward', { dx: dx.storage, dW: this.weight.gradData(), db: this.bias?.gradData() ?? null,
      dy: dya.storage, x: x.storage, W: this.weight.storageFor(x.dtype as 'float32'), rows: x.size / this.config.inFeatures,
      inFeatures: this.config.inFeatures, outFeatures: this.config.outFeatures, precision: this.precision });
    tmp.close();
    return this.toActivation(dx);
  }
}
registerModelClass(Linear);
