import type { PlacementConfig } from '../core/device';
import { invalidArg } from '../validation/errors';
import { EncoderBlock } from '../layers/blocks';
import { nonEmpty, oneOf, positive, positiveInt, probability, seedOf, bool } from '../validation/values';
import { accumulate, DropoutSite } from '../layers/dropout';
import { ACTIVATIONS, type Activation } from '../layers/feedforward';
import { LayerNorm } from '../layers/layernorm';
import { Pooler } from '../layers/pooler';
import { requireSaved, Module, Parameter } from '../core/module';
import { OptionKeys } from '../validation/options';
import { registerModelClass } from '../io/persist';
import { op, type OpName, type Program } from '../core/program';
import { Random } from '../core/random';
import { Scope } from '../core/scope';
import { checkActivation, checkTensor, Tensor } from '../core/tensor';

/** Checks config.padIdx: null or a token id below vocabSize. */
function padIdxOf(v: unknown, vocabSize: number): number | null {
  if (v === null) return null;
  if (!Number.isInteger(v) || (v as number) < 0 || (v as number) >= vocabSize) invalidArg('config.padIdx', `null or an integer in [0, ${vocabSize})`, v);
  return v as number;
}

export interface BertConfig extends PlacementConfig {
  /** Vocabulary size (vocab_size, default 30522). */
  vocabSize?: number;
  /** Width (hidden_size, default 768). */
  dModel?: number;
  /** Heads (num_attention_heads, default 12). */
  numHeads?: number;
  /** Feed-forward width (intermediate_size, default 3072). */
  dFF?: number;
  /** Blocks (num_hidden_layers, default 12). */
  depth?: number;
  /** Longest sequence (max_position_embeddings, default 512). */
  maxPositions?: number;
  /** Token types (type_vocab_size, default 2). */
  typeVocabSize?: number;
  /** The padding token, whose embedding row gets no gradient, as torch's Embedding(padding_idx) (pad_token_id; default null: none). */
  padIdx?: number | null;
  /** LayerNorm eps (layer_norm_eps, default 1e-12). */
  eps?: number;
  /** Feed-forward activation (hidden_act; default 'gelu', the erf form). */
  activation?: Activation;
  /** Dropout on the embeddings and on the blocks' residual branches, as BERT's (hidden_dropout_prob; default 0). */
  dropout?: number;
  /** Dropout on the attention weights (attention_probs_dropout_prob; default `dropout`). BERT has none on the MLP hidden layer. */
  attnDropout?: number;
  /** The pooler, tanh(dense(h[:, 0])) (default true; add_pooling_layer). */
  pooler?: boolean;
  seed?: number;
}

const BERT_CONFIG = new OptionKeys<BertConfig>('BertModel config', { vocabSize: true, dModel: true, numHeads: true, dFF: true, depth: true,
  maxPositions: true, typeVocabSize: true, padIdx: true, eps: true, activation: true, dropout: true, attnDropout: true, pooler: true, seed: true, device: true, precision: true });

/** Inputs of BertModel.forward besides the token ids; as transformers' BertModel(input_ids, token_type_ids=..., attention_mask=...). */
export interface BertInputs {
  /** int32 [B, T], each in [0, typeVocabSize) (default all 0). */
  tokenTypeIds?: Tensor;
  /** int32 or bool [B, T], transformers' meaning: 1 (true) = a token, 0 (false) = padding no token attends to (default: no padding). */
  attentionMask?: Tensor;
}
const BERT_INPUTS = new OptionKeys<BertInputs>('BertModel.forward inputs', { tokenTypeIds: true, attentionMask: true });

/** The outputs of BertModel.forward. */
export interface BertOutput {
  /** [B, T, D]: the last block's output. */
  lastHiddenState: Tensor<'float32'>;
  /** [B, D]: tanh(dense(lastHiddenState[:, 0])), or null without the pooler. */
  poolerOutput: Tensor<'float32'> | null;
}

/**
 * A BERT encoder (transformers' BertModel): word + position + token-type embeddings, LayerNorm,
 * post-LN EncoderBlocks over the tokens with padding masked out as keys, and the pooler.
 * Parameters: word_embeddings [V, D], position_embeddings [maxPositions, D],
 * token_type_embeddings [typeVocabSize, D], embed_norm.*, blocks.{i}.*, pooler.dense.* (see
 * loadHfBert for transformers' names). Positions are 0..T−1 (absolute).
 */
export class BertModel extends Module {
  /** The ops it runs (Module.ops). */
  static override readonly ops: readonly OpName[] = ['embeddingForward', 'embeddingBackward', 'copyRows', 'accumulate', 'dropoutForward', 'dropoutBackward'];
  readonly config: Required<Omit<BertConfig, 'device' | 'precision'>>;
  readonly word_embeddings: Parameter;
  readonly position_embeddings: Parameter;
  readonly token_type_embeddings: Parameter;
  readonly embed_norm: LayerNorm;
  readonly blocks: EncoderBlock[];
  readonly pooler: Pooler | null;
  private readonly drop: DropoutSite;
  private saved: { ids: Tensor<'int32'>; types: Tensor<'int32'> } | null = null;

  constructor(config: BertConfig = {}) {
    super();
    const raw = BERT_CONFIG.check('config', config);
    this.placeOn(config);
    const c = (this.config = {
      vocabSize: positiveInt('config.vocabSize', raw.vocabSize ?? 30522), dModel: positiveInt('config.dModel', raw.dModel ?? 768),
      numHeads: positiveInt('config.numHeads', raw.numHeads ?? 12), dFF: positiveInt('config.dFF', raw.dFF ?? 3072),
      depth: positiveInt('config.depth', raw.depth ?? 12), maxPositions: positiveInt('config.maxPositions', raw.maxPositions ?? 512),
      typeVocabSize: positiveInt('config.typeVocabSize', raw.typeVocabSize ?? 2), padIdx: padIdxOf(raw.padIdx ?? null, raw.vocabSize ?? 30522),
      eps: positive('config.eps', raw.eps ?? 1e-12),
      activation: oneOf('config.activation', raw.activation ?? 'gelu', ACTIVATIONS), dropout: probability('config.dropout', raw.dropout ?? 0),
      attnDropout: probability('config.attnDropout', raw.attnDropout ?? raw.dropout ?? 0),
      pooler: bool('config.pooler', raw.pooler ?? true), seed: seedOf(raw.seed ?? 0),
    });
    const rng = new Random(c.seed), D = c.dModel;
    const table = (name: string, rows: number) => this.addParameter(name, [rows, D], rng.normalArray(rows * D, 0.02));
    this.word_embeddings = table('word_embeddings', c.vocabSize);
    this.position_embeddings = table('position_embeddings', c.maxPositions);
    this.token_type_embeddings = table('token_type_embeddings', c.typeVocabSize);
    this.embed_norm = this.addModule('embed_norm', new LayerNorm({ dModel: D, eps: c.eps }));
    this.blocks = Array.from({ length: c.depth }, (_, i) => this.addModule(`blocks.${i}`, new EncoderBlock({ dModel: D, numHeads: c.numHeads,
      dFF: c.dFF, normFirst: false, activation: c.activation, projDropout: c.dropout, attnDropout: c.attnDropout, hiddenDropout: 0, eps: c.eps,
      seed: rng.seed() })));
    this.pooler = c.pooler ? this.addModule('pooler', new Pooler({ dModel: D, seed: rng.seed() })) : null;
    this.drop = new DropoutSite(c.dropout, this.addRng('drop', new Random(rng.seed())));
  }

  /** The token types (zeros by default) and the key padding mask (true = padding) of the inputs. */
  private inputs(ids: Tensor<'int32'>, o: BertInputs): { types: Tensor<'int32'>; padding: Tensor<'bool'> | undefined } {
    const [B, T] = ids.shape;
    const types = o.tokenTypeIds === undefined ? Tensor.zeros([B, T], 'int32', ids.device)
      : checkTensor('inputs.tokenTypeIds', o.tokenTypeIds, 'int32', [B, T]);
    if (o.attentionMask === undefined) return { types, padding: undefined };
    const given = o.attentionMask as Tensor;
    const m = checkTensor('inputs.attentionMask', given, given instanceof Tensor && given.dtype === 'bool' ? 'bool' : 'int32', [B, T]);
    const padding = Tensor.from(Uint8Array.from(m.hostValues() as ArrayLike<number>, (v) => (v === 0 ? 1 : 0)), [B, T], m.device) as Tensor<'bool'>;
    this.activations.add(padding);
    return { types, padding };
  }

  /** inputIds int32 [B, T] → { lastHiddenState [B, T, D], poolerOutput [B, D] | null }. */
  *forwardProgram(inputIds: Tensor, inputs: BertInputs = {}): Program<BertOutput> {
    const { vocabSize: V, dModel: D, maxPositions, typeVocabSize } = this.config;
    const ids = nonEmpty('inputIds', checkTensor('inputIds', inputIds, 'int32', [null, null]), { 0: 'a batch', 1: 'a sequence length' });
    const o = BERT_INPUTS.check('inputs', inputs);
    const [B, T] = ids.shape, keep = this.activations;
    if (T > maxPositions) invalidArg('inputIds', `at most maxPositions (${maxPositions}) tokens per sequence`, ids);
    keep.close();
    const { types, padding } = this.inputs(ids, o);
    if (types !== o.tokenTypeIds) keep.add(types);
    const words = keep.add(Tensor.empty([B, T, D], 'float32', ids.device));
    yield* op('embeddingForward', { B, T, V, D, maxLen: maxPositions, out: words.storage, ids: ids.storage,
      table: this.word_embeddings.storage, pos: this.position_embeddings.storage });
    const typed = keep.add(Tensor.empty([B, T, D], 'float32', ids.device));
    yield* op('embeddingForward', { B, T, V: typeVocabSize, D, out: typed.storage, ids: types.storage, table: this.token_type_embeddings.storage });
    let h = yield* this.embed_norm.forwardResidual(words, typed);
    keep.free(words, typed); // the norm keeps the sum it normalised; backward needs nothing else of them
    yield* this.drop.forwardInPlace(h, this.training);
    for (const blk of this.blocks) {
      h = yield* blk.forwardOps(keep.add(h), { keyPaddingMask: padding });
      this.dropActivations(padding ?? null);
    }
    this.saved = { ids, types };
    if (!this.pooler) return { lastHiddenState: h, poolerOutput: null };
    return { lastHiddenState: h, poolerOutput: yield* this.pooler.forwardOps(h) };
  }

  /**
   * The gradients of the outputs (dLastHiddenState [B, T, D]; dPoolerOutput [B, D] with the
   * pooler) → accumulates every parameter's gradient (token ids have none: returns null).
   */
  *backwardProgram(dLastHiddenState: Tensor, dPoolerOutput?: Tensor): Program<null> {
    const { ids, types } = requireSaved(this.saved, 'BertModel');
    const [B, T] = ids.shape, { vocabSize: V, dModel: D, maxPositions, typeVocabSize } = this.config;
    const tmp = new Scope();
    let d = checkActivation('dLastHiddenState', dLastHiddenState, [B, T, D]);
    if (dPoolerOutput !== undefined) {
      if (!this.pooler) invalidArg('dPoolerOutput', 'nothing (the model has no pooler)', dPoolerOutput);
      const dp = tmp.add(yield* this.pooler.backwardOps(checkActivation('dPoolerOutput', dPoolerOutput, [B, D])));
      d = yield* accumulate(dp, d);
    }
    for (let i = this.blocks.length - 1; i >= 0; i--) d = tmp.replace(d, yield* this.blocks[i].backwardOps(d));
    d = tmp.replace(d, yield* this.drop.backward(d));
    // (the embedding op has no bf16 kernel: a bfloat16 gradient, precision 'bf16', is converted)
    const dsum = tmp.replace(d, (yield* this.embed_norm.backwardOps(d)).cast('float32'));
    // The padding row's gradient is put back as it was: torch's Embedding(padding_idx) gives it none.
    const pad = this.config.padIdx, dword = this.word_embeddings.gradData();
    const padRow = pad === null ? null : tmp.add(Tensor.empty([D], 'float32', dsum.device));
    if (padRow) yield* op('copyRows', { rows: 1, cols: D, dst: padRow.storage, dstStride: D, src: dword, srcStride: D, srcOffset: pad! * D });
    yield* op('embeddingBackward', { B, T, V, D, maxLen: maxPositions, dtable: dword, dpos: this.position_embeddings.gradData(),
      dout: dsum.storage, ids: ids.storage });
    if (padRow) yield* op('copyRows', { rows: 1, cols: D, dst: dword, dstStride: D, dstOffset: pad! * D, src: padRow.storage, srcStride: D });
    yield* op('embeddingBackward', { B, T, V: typeVocabSize, D, dtable: this.token_type_embeddings.gradData(), dout: dsum.storage,
      ids: types.storage });
    tmp.close();
    return null;
  }
}
registerModelClass(BertModel);
