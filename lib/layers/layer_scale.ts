import { constant } from '../init';
import { requireSaved, rowsOf, Module, Parameter } from '../module';
import { OptionKeys } from '../options';
import { registerModelClass } from '../persist';
import { op, type Program } from '../program';
import { checkTensor, Tensor } from '../tensor';
import type { Device } from '../device';
import { positive, positiveInt, emptyLike, type Settings } from './common';

export interface LayerScaleConfig {
  /** Scaled width (the last dimension). */
  dModel: number;
  /** Initial value of every scale (default 1e-5, timm's LayerScale default). */
  initValues?: number;
  /** Where the parameters are created: 'cpu' (default) or 'cuda', as `.to(device)` after construction (not saved with the config). */
  device?: Device;
}

const LAYER_SCALE_CONFIG = new OptionKeys<LayerScaleConfig>('LayerScale config', { dModel: true, initValues: true, device: true });

/**
 * timm's LayerScale: y = x · gamma per channel (the last dimension). Parameter: gamma [D].
 * Runs as the linear op with the diagonal matrix diag(gamma) (every other product is an exact
 * zero, so each value is the one multiply torch does), on any device; its weight gradient's
 * diagonal is gamma's. That costs a D × D product per row where a native per-channel scale op
 * would cost D.
 */
export class LayerScale extends Module {
  readonly config: Settings<LayerScaleConfig>;
  readonly gamma: Parameter;
  private saved: { x: Tensor<'float32'>; diag: Tensor<'float32'> } | null = null;

  constructor(config: LayerScaleConfig) {
    super();
    config = LAYER_SCALE_CONFIG.check('config', config);
    this.placeOn(config.device);
    const dModel = positiveInt('config.dModel', config.dModel);
    this.config = { dModel, initValues: positive('config.initValues', config.initValues ?? 1e-5) };
    this.gamma = this.addParameter('gamma', [dModel], constant(dModel, this.config.initValues));
  }

  /** diag(v) [D, D] from v [D] (written along the diagonal: row stride D + 1). */
  private *diagonal(v: Float32Array, device: Tensor['device']): Program<Tensor<'float32'>> {
    const D = this.config.dModel, m = Tensor.zeros([D, D], 'float32', device);
    yield* op('copyRows', { rows: D, cols: 1, dst: m.storage, dstStride: D + 1, src: v, srcStride: 1 });
    return m;
  }

  /** x [..., D] → x · gamma. */
  *forwardProgram(x: Tensor): Program<Tensor<'float32'>> {
    const [rows, D] = rowsOf('x', x, this.config.dModel, 1);
    const xt = x as Tensor<'float32'>, out = emptyLike(xt);
    this.activations.close();
    const diag = this.activations.add(yield* this.diagonal(this.gamma.storage, xt.device));
    yield* op('linearForward', { rows, inFeatures: D, outFeatures: D, y: out.storage, x: xt.storage, W: diag.storage });
    this.saved = { x: xt, diag };
    return out;
  }

  /** dy [..., D] → dy · gamma; gamma.grad += Σ_rows dy · x. */
  *backwardProgram(dy: Tensor): Program<Tensor<'float32'>> {
    const { x, diag } = requireSaved(this.saved, 'LayerScale'), D = this.config.dModel;
    const d = checkTensor('dy', dy, 'float32', x.shape);
    const dx = emptyLike(x), dW = Tensor.zeros([D, D], 'float32', x.device), dg = Tensor.empty([D], 'float32', x.device);
    try {
      yield* op('linearBackward', { rows: x.size / D, inFeatures: D, outFeatures: D, dx: dx.storage, dW: dW.storage, dy: d.storage,
        x: x.storage, W: diag.storage });
      yield* op('copyRows', { rows: D, cols: 1, dst: dg.storage, dstStride: 1, src: dW.storage, srcStride: D + 1 });
      yield* op('accumulate', { n: D, y: this.gamma.gradData(), x: dg.storage });
    } finally {
      dW.dispose();
      dg.dispose();
    }
    return dx;
  }
}
registerModelClass(LayerScale);
