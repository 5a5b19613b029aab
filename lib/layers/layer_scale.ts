import { constant } from '../core/init';
import { requireSaved, rowsOf, Module, Parameter } from '../core/module';
import { OptionKeys } from '../validation/options';
import { registerModelClass } from '../io/persist';
import { op, type OpName, type Program } from '../core/program';
import { Scope } from '../core/scope';
import { checkActivation, emptyLike, Tensor } from '../core/tensor';
import type { PlacementConfig } from '../core/device';
import { positive, positiveInt, type Settings } from '../validation/values';

export interface LayerScaleConfig extends PlacementConfig {
  /** Scaled width (the last dimension). */
  dModel: number;
  /** Initial value of every scale (default 1e-5, timm's LayerScale default). */
  initValues?: number;
}

const LAYER_SCALE_CONFIG = new OptionKeys<LayerScaleConfig>('LayerScale config', { dModel: true, initValues: true, device: true, precision: true });

/**
 * timm's LayerScale: y = x · gamma per channel (the last dimension). Parameter: gamma [D].
 * Runs as the channelScale ops on any device: forward y = x · gamma; backward dx = dy · gamma and
 * gamma.grad += Σ_rows dy · x.
 */
export class LayerScale extends Module {
  /** The ops it runs (Module.ops). */
  static override readonly ops: readonly OpName[] = ['channelScaleForward', 'channelScaleBackward'];
  readonly config: Settings<LayerScaleConfig>;
  readonly gamma: Parameter;
  private saved: Tensor<'float32'> | null = null;

  constructor(config: LayerScaleConfig) {
    super();
    config = LAYER_SCALE_CONFIG.check('config', config);
    this.placeOn(config);
    const dModel = positiveInt('config.dModel', config.dModel);
    this.config = { dModel, initValues: positive('config.initValues', config.initValues ?? 1e-5) };
    this.gamma = this.addParameter('gamma', [dModel], constant(dModel, this.config.initValues));
  }

  /** x [..., D] → x · gamma. */
  *forwardProgram(x: Tensor): Program<Tensor<'float32'>> {
    const [rows, cols] = rowsOf('x', x, this.config.dModel, 1);
    this.activations.close();
    const xt = this.asActivation(x), out = emptyLike(xt);
    yield* op('channelScaleForward', { rows, cols, y: out.storage, x: xt.storage, gamma: this.gamma.storage });
    this.saved = xt;
    return out;
  }

  /** dy [..., D] → dy · gamma; gamma.grad += Σ_rows dy · x. */
  *backwardProgram(dy: Tensor): Program<Tensor<'float32'>> {
    const x = requireSaved(this.saved, 'LayerScale'), cols = this.config.dModel;
    checkActivation('dy', dy, x.shape);
    const tmp = new Scope(dy), dx = emptyLike(x), d = tmp.add(dy.cast(x.dtype as 'float32'));
    yield* op('channelScaleBackward', { rows: x.size / cols, cols, dx: dx.storage, dgamma: this.gamma.gradData(), dy: d.storage,
      x: x.storage, gamma: this.gamma.storage });
    tmp.close();
    return dx;
  }
}
registerModelClass(LayerScale);
