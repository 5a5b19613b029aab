import { requireSaved, rowsOf, Module, Parameter } from '../core/module';
import { constant } from '../core/init';
import { OptionKeys } from '../validation/options';
import { registerModelClass } from '../io/persist';
import { op, type OpName, type Program } from '../core/program';
import { Scope } from '../core/scope';
import { checkActivation, emptyLike, Tensor, type Storage } from '../core/tensor';
import type { PlacementConfig } from '../core/device';
import { positive, positiveInt, type Settings } from '../validation/values';

export interface LayerNormConfig extends PlacementConfig {
  /** Normalised width (the last dimension). */
  dModel: number;
  /** Added to the variance (default 1e-5, as torch.nn.LayerNorm). */
  eps?: number;
}

const LAYERNORM_CONFIG = new OptionKeys<LayerNormConfig>('LayerNorm config', { dModel: true, eps: true, device: true, precision: true });

/**
 * LayerNorm over the last dimension: y = (x − mean) / sqrt(var + eps) · weight + bias. Parameters: weight [D], bias [D].
 * Under precision 'bf16' on 'cuda' its input, output (and fused residual sum) are bfloat16, the statistics float32.
 */
export class LayerNorm extends Module {
  /** The ops it runs (Module.ops). */
  static override readonly ops: readonly OpName[] = ['layernormForward', 'layernormBackward'];
  readonly config: Settings<LayerNormConfig>;
  readonly weight: Parameter;
  readonly bias: Parameter;
  private saved: { x: Tensor<'float32'>; mean: Storage<'float32'>; rstd: Storage<'float32'> } | null = null;

  /** Row statistics [rows] on the device of `x`, kept for backward until the next forward. */
  private stats(x: Tensor, rows: number): [Storage<'float32'>, Storage<'float32'>] {
    return [this.activations.add(Tensor.empty([rows], 'float32', x.device)).storage,
      this.activations.add(Tensor.empty([rows], 'float32', x.device)).storage];
  }

  constructor(config: LayerNormConfig) {
    super();
    config = LAYERNORM_CONFIG.check('config', config);
    this.placeOn(config);
    const dModel = positiveInt('config.dModel', config.dModel);
    this.config = { dModel, eps: positive('config.eps', config.eps ?? 1e-5) };
    this.weight = this.addParameter('weight', [dModel], constant(dModel, 1));
    this.bias = this.addParameter('bias', [dModel], constant(dModel, 0));
  }

  /** x [..., D] → y [..., D]. */
  *forwardProgram(x: Tensor): Program<Tensor<'float32'>> {
    const [rows, D] = rowsOf('x', x, this.config.dModel, 1);
    this.activations.close();
    const xa = this.asActivation(x), out = emptyLike(xa);
    const [mean, rstd] = this.stats(x, rows);
    yield* op('layernormForward', { rows, D, eps: this.config.eps, out: out.storage, mean, rstd, x: xa.storage,
      gamma: this.weight.storage, beta: this.bias.storage });
    this.saved = { x: xa, mean, rstd };
    return out;
  }

  /**
   * y = LN(x + residual), the fused residual add of a post-LN block; backward then returns the
   * gradient of the sum, which is both dx and d(residual).
   */
  *forwardResidual(x: Tensor, residual: Tensor): Program<Tensor<'float32'>> {
    return (yield* this.forwardResidualSum(x, residual, this.activations)).out;
  }

  /**
   * forwardResidual that also returns the sum x + residual, for a pre-LN block whose residual stream
   * goes on from it: the sum belongs to `owner` (the caller's scope, which must keep it as long as
   * this layer's backward may read it) instead of this layer's activations.
   */
  *forwardResidualSum(x: Tensor, residual: Tensor, owner: Scope): Program<{ out: Tensor<'float32'>; sum: Tensor<'float32'> }> {
    const [rows, D] = rowsOf('x', x, this.config.dModel, 1);
    checkActivation('residual', residual, x.shape);
    this.activations.close();
    const xa = this.asActivation(x), ra = this.asActivation(residual);
    const out = emptyLike(xa), sum = owner.add(emptyLike(xa));
    const [mean, rstd] = this.stats(x, rows);
    yield* op('layernormForward', { rows, D, eps: this.config.eps, out: out.storage, sum: sum.storage, mean, rstd,
      x: xa.storage, residual: ra.storage, gamma: this.weight.storage, beta: this.bias.storage });
    this.saved = { x: sum, mean, rstd };
    this.forwardDone(this.savesActivations, out);
    return { out, sum };
  }

  /**
   * dy [..., D] → dx [..., D]; accumulates weight.grad and bias.grad. `dadd`, when given, is a
   * gradient reaching the same input along another path (a residual branch): it is added to dx.
   */
  *backwardProgram(dy: Tensor, dadd?: Tensor): Program<Tensor<'float32'>> {
    const s = requireSaved(this.saved, 'LayerNorm');
    checkActivation('dy', dy, s.x.shape);
    if (dadd !== undefined) checkActivation('dadd', dadd, s.x.shape);
    const tmp = new Scope(), dx = emptyLike(s.x);
    const dya = this.asActivation(dy, tmp), dadda = dadd === undefined ? null : this.asActivation(dadd, tmp);
    yield* op('layernormBackward', { rows: s.x.size / this.config.dModel, D: this.config.dModel, dx: dx.storage,
      dgamma: this.weight.gradData(), dbeta: this.bias.gradData(), dout: dya.storage, dadd: dadda?.storage ?? null,
      x: s.x.storage, mean: s.mean, rstd: s.rstd, gamma: this.weight.storage });
    tmp.close();
    return dx;
  }
}
registerModelClass(LayerNorm);
