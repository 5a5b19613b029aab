import { requireSaved, Module } from '../core/module';
import { OptionKeys } from '../validation/options';
import { registerModelClass } from '../io/persist';
import { op, type OpName, type Program } from '../core/program';
import { Random } from '../core/random';
import { Scope } from '../core/scope';
import { checkActivation, emptyLike, Tensor } from '../core/tensor';
import type { PlacementConfig } from '../core/device';
import { nonEmpty, positiveInt, seedOf, type Settings } from '../validation/values';
import { Linear } from './linear';

export interface PoolerConfig extends PlacementConfig {
  dModel: number;
  seed?: number;
}

const POOLER_CONFIG = new OptionKeys<PoolerConfig>('Pooler config', { dModel: true, seed: true, device: true, precision: true });

/**
 * BERT's (and Hugging Face ViTModel's) pooler: tanh(dense(x[:, 0])), tokens [B, T, D] → [B, D] (bfloat16 under precision 'bf16' on 'cuda').
 * Parameters: dense.weight [D, D], dense.bias [D]. The tanh is the activation ops (any device);
 * its backward reads the saved pre-activation.
 */
export class Pooler extends Module {
  /** The ops it runs (Module.ops). */
  static override readonly ops: readonly OpName[] = ['activationForward', 'activationBackward', 'copyRows'];
  readonly config: Settings<PoolerConfig>;
  readonly dense: Linear;
  private saved: { h: Tensor<'float32'>; T: number } | null = null;

  constructor(config: PoolerConfig) {
    super();
    config = POOLER_CONFIG.check('config', config);
    this.placeOn(config);
    const dModel = positiveInt('config.dModel', config.dModel);
    this.config = { dModel, seed: seedOf(config.seed ?? 0) };
    this.dense = this.addModule('dense', new Linear({ inFeatures: dModel, outFeatures: dModel, seed: new Random(this.config.seed).seed() }));
  }

  /** tokens [B, T, D] → tanh(dense(tokens[:, 0])) [B, D]. */
  *forwardProgram(tokens: Tensor): Program<Tensor<'float32'>> {
    const D = this.config.dModel;
    const xin = nonEmpty('tokens', checkActivation('tokens', tokens, [null, null, D]), { 0: 'a batch', 1: 'a sequence length' });
    const [B, T] = xin.shape, keep = this.activations;
    keep.close();
    const x = this.asActivation(xin), first = keep.add(Tensor.empty([B, D], x.dtype as 'float32', x.device));
    yield* op('copyRows', { rows: B, cols: D, dst: first.storage, dstStride: D, src: x.storage, srcStride: T * D });
    const h = keep.add(yield* this.dense.forwardOps(first));
    const y = emptyLike(h);
    yield* op('activationForward', { n: y.size, act: 'tanh', y: y.storage, x: h.storage });
    this.saved = { h, T };
    return y;
  }

  /** dy [B, D] → d(tokens) [B, T, D] (zero but for token 0); accumulates dense's gradients. */
  *backwardProgram(dy: Tensor): Program<Tensor<'float32'>> {
    const { h, T } = requireSaved(this.saved, 'Pooler'), [B, D] = h.shape;
    checkActivation('dy', dy, h.shape);
    const tmp = new Scope(dy), d = tmp.add(dy.cast(h.dtype as 'float32'));
    const dh = tmp.add(emptyLike(h));
    yield* op('activationBackward', { n: dh.size, act: 'tanh', dx: dh.storage, dy: d.storage, x: h.storage });
    const dfirst = tmp.add(yield* this.dense.backwardOps(dh));
    const dtokens = Tensor.zeros([B, T, D], dfirst.dtype as 'float32', d.device);
    yield* op('copyRows', { rows: B, cols: D, dst: dtokens.storage, dstStride: T * D, src: dfirst.storage, srcStride: D });
    tmp.close();
    return dtokens;
  }
}
registerModelClass(Pooler);
