/**
 * Unknown keys in the config and options objects of the public API: each is ERR_NF_INVALID_ARG
 * naming the key and the object it was in, and the key meant when one is close (a typo, another
 * case, snake_case, another library's name for it: learningRate → lr, nhead → numHeads) — "Unknown key 'casual' (did you mean 'causal'?) in MultiHeadAttention.forward
 * options" — never silently ignored. Several keys per object kind, with and without a suggestion.
 */
import * as os from 'node:os';
import * as path from 'node:path';

import {
  AdamW, cosineWithWarmup, crossEntropy, Decoder, DecoderBlock, Encoder, EncoderBlock, FeedForward, inverseSqrtWarmup,
  LayerNorm, Linear, mse, MultiHeadAttention, PatchEmbedding, resume, resumeAsync, saveCheckpoint, saveCheckpointAsync,
  scheduleFromConfig, SGD, Tensor, trainStep, trainStepAsync, Transformer, ViTClassifier, ViTDecoder, ViTEncoder,
} from '../../lib';
import { Catalogue } from './case';

const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
/** The message for `key` in `where`, with the suggestion `meant` (or, when null, none). */
const unknown = (key: string, where: string, meant: string | null) =>
  new RegExp(`Unknown key '${esc(key)}'${meant ? ` \\(did you mean '${esc(meant)}'\\?\\)` : ''} in ${esc(where)}; allowed keys: `);

const D = 8, H = 2, F = 16;
const fl = (shape: number[]) => Tensor.zeros(shape);
const ints = (shape: number[]) => Tensor.zeros(shape, 'int32');
const vitCfg = { imgSize: 8, patchSize: 4, inChannels: 1, dModel: D, numHeads: H, dFF: F, depth: 1 };
const seqCfg = { dModel: D, numHeads: H, dFF: F, depth: 1 };

/** [constructor name, make(config), a valid config, [bad key, the key meant or null]...] */
const configs: [string, (c: never) => unknown, object, [string, string | null][]][] = [
  ['Linear', (c) => new Linear(c), { inFeatures: 2, outFeatures: 2 }, [['outFeature', 'outFeatures'], ['Bias', 'bias'], ['activation', null]]],
  ['LayerNorm', (c) => new LayerNorm(c), { dModel: D }, [['d_model', 'dModel'], ['epsilon', 'eps'], ['EPS', 'eps'], ['elementwiseAffine', null]]],
  ['MultiHeadAttention', (c) => new MultiHeadAttention(c), { dModel: D, numHeads: H }, [['num_heads', 'numHeads'], ['heads', 'numHeads'], ['nhead', 'numHeads'], ['casual', null]]],
  ['FeedForward', (c) => new FeedForward(c), { dModel: D, dFF: F }, [['dff', 'dFF'], ['activaton', 'activation'], ['hidden', null]]],
  ['PatchEmbedding', (c) => new PatchEmbedding(c), { imgSize: 8, patchSize: 4, inChannels: 1, dModel: D },
    [['imageSize', 'imgSize'], ['inChannel', 'inChannels'], ['stride', null]]],
  ['EncoderBlock', (c) => new EncoderBlock(c), { dModel: D, numHeads: H, dFF: F }, [['normfirst', 'normFirst'], ['dropOut', 'dropout'], ['layerScale', 'initValues'], ['crossAttention', null]]],
  ['DecoderBlock', (c) => new DecoderBlock(c), { dModel: D, numHeads: H, dFF: F }, [['norm_first', 'normFirst'], ['crossAttention', null]]],
  ['ViTEncoder', (c) => new ViTEncoder(c), vitCfg, [['depht', 'depth'], ['numClasses', null], ['img_size', 'imgSize']]],
  ['ViTClassifier', (c) => new ViTClassifier(c), vitCfg, [['numclasses', 'numClasses'], ['classes', 'numClasses'], ['patch', 'patchSize'], ['num_layers', 'depth'], ['labels', null]]],
  ['ViTDecoder', (c) => new ViTDecoder(c), vitCfg, [['patch_size', 'patchSize'], ['numClasses', null]]],
  ['Encoder', (c) => new Encoder(c), { ...seqCfg, vocabSize: 5, maxLen: 6 }, [['vocab_size', 'vocabSize'], ['srcVocab', null]]],
  ['Decoder', (c) => new Decoder(c), { ...seqCfg, vocabSize: 5, maxLen: 6 }, [['maxlen', 'maxLen'], ['tgtVocab', null]]],
  ['Transformer', (c) => new Transformer(c), { ...seqCfg, srcVocab: 5, tgtVocab: 5, maxLen: 6 },
    [['tgtvocab', 'tgtVocab'], ['pad_idx', 'padIdx'], ['srcVocabSize', null], ['vocabSize', null],
      // PyTorch's nn.Transformer and Hugging Face names for the same settings.
      ['nhead', 'numHeads'], ['d_model', 'dModel'], ['dim_feedforward', 'dFF'], ['hidden_size', 'dModel'], ['num_attention_heads', 'numHeads'],
      ['intermediate_size', 'dFF'], ['num_hidden_layers', 'depth'], ['layer_norm_eps', 'eps'], ['norm_first', 'normFirst']]],
];

function configCases(c: Catalogue): void {
  for (const [name, make, valid, keys] of configs)
    for (const [key, meant] of keys)
      c.add(`new ${name}({ ${key} })`, 'ERR_NF_INVALID_ARG', unknown(key, `${name} config`, meant), () => make({ ...valid, [key]: 1 } as never));
  c.add('new Linear with two unknown keys', 'ERR_NF_INVALID_ARG',
    /Unknown keys 'outFeature' \(did you mean 'outFeatures'\?\), 'foo' in Linear config/, () => new Linear({ inFeatures: 2, outFeature: 2, foo: 1 } as never));
}

function forwardCases(c: Catalogue): void {
  const x = fl([2, 3, D]), mem = fl([2, 5, D]), images = fl([1, 1, 8, 8]), tokens = ints([2, 4]);
  const mha = new MultiHeadAttention({ dModel: D, numHeads: H });
  const enc = new EncoderBlock({ dModel: D, numHeads: H, dFF: F }), dec = new DecoderBlock({ dModel: D, numHeads: H, dFF: F });
  const vit = new ViTEncoder(vitCfg), cls = new ViTClassifier(vitCfg), vdec = new ViTDecoder(vitCfg);
  const encoder = new Encoder({ ...seqCfg, vocabSize: 5, maxLen: 6 }), decoder = new Decoder({ ...seqCfg, vocabSize: 5, maxLen: 6 });
  const tr = new Transformer({ ...seqCfg, srcVocab: 5, tgtVocab: 5, maxLen: 6 });
  const cases: [string, string, string | null, (o: never) => unknown][] = [
    ['MultiHeadAttention.forward', 'casual', 'causal', (o) => mha.forward(x, o)],
    ['MultiHeadAttention.forward', 'need_weights', 'needWeights', (o) => mha.forward(x, o)],
    ['MultiHeadAttention.forward', 'attn_mask', 'attnMask', (o) => mha.forward(x, o)],
    ['MultiHeadAttention.forward', 'dropout', null, (o) => mha.forward(x, o)],
    ['MultiHeadAttention.forward', 'casual', 'causal', (o) => mha.forwardAsync(x, o)],
    ['EncoderBlock.forward', 'key_padding_mask', 'keyPaddingMask', (o) => enc.forward(x, o)],
    ['EncoderBlock.forward', 'casual', 'causal', (o) => enc.forward(x, o)],
    ['EncoderBlock.forward', 'memory', null, (o) => enc.forward(x, o)],
    ['DecoderBlock.forward', 'tgt_mask', 'tgtMask', (o) => dec.forward(x, mem, o)],
    ['DecoderBlock.forward', 'attnMask', null, (o) => dec.forward(x, mem, o)],
    ['ViTEncoder.forward', 'needweights', 'needWeights', (o) => vit.forward(images, o)],
    ['ViTClassifier.forward', 'need_weights', 'needWeights', (o) => cls.forward(images, o)],
    ['ViTClassifier.forward', 'labels', null, (o) => cls.forwardAsync(images, o)],
    ['ViTDecoder.forward', 'casual', 'causal', (o) => vdec.forward(mem, o)],
    ['ViTDecoder.forward', 'attn_mask', 'attnMask', (o) => vdec.forward(mem, o)],
    ['ViTDecoder.forward', 'tgtKeyPaddingMask', null, (o) => vdec.forward(mem, o)],
    ['Encoder.forward', 'keyPaddingMasks', 'keyPaddingMask', (o) => encoder.forward(tokens, o)],
    ['Encoder.forward', 'srcKeyPaddingMask', 'keyPaddingMask', (o) => encoder.forward(tokens, o)],
    ['Encoder.forward', 'mask', null, (o) => encoder.forward(tokens, o)],
    ['Decoder.forward', 'memoryKeyPadingMask', 'memoryKeyPaddingMask', (o) => decoder.forward(tokens, mem, o)],
    ['Decoder.forward', 'causal', null, (o) => decoder.forward(tokens, mem, o)],
    ['Transformer.generate', 'max_len', 'maxLen', (o) => tr.generate(ints([1, 3]), o)],
    ['Transformer.generate', 'use_cache', 'useCache', (o) => tr.generate(ints([1, 3]), o)],
    ['Transformer.generate', 'eoss', 'eos', (o) => tr.generateAsync(ints([1, 3]), o)],
    ['Transformer.generate', 'beamSize', null, (o) => tr.generate(ints([1, 3]), o)],
    ['Linear.eval', 'keepActivation', 'keepActivations', (o) => new Linear({ inFeatures: 2, outFeatures: 2 }).eval(o)],
    ['ViTClassifier.eval', 'dropout', null, (o) => cls.eval(o)],
    ['Linear.loadStateDict', 'Strict', 'strict', (o) => new Linear({ inFeatures: 2, outFeatures: 2 }).loadStateDict({}, o)],
    ['Linear.loadStateDict', 'partial', null, (o) => new Linear({ inFeatures: 2, outFeatures: 2 }).loadStateDict({}, o)],
  ];
  for (const [where, key, meant, call] of cases)
    c.add(`${where}(..., { ${key} })`, 'ERR_NF_INVALID_ARG', unknown(key, `${where} options`, meant), () => call({ [key]: true } as never));
}

function trainingCases(c: Catalogue): void {
  const logits = fl([2, 3]), targets = Tensor.from(Int32Array.of(0, 2), [2]);
  const model = new Linear({ inFeatures: 3, outFeatures: 3 }), params = model.parameters();
  const adamw = new AdamW(params), sgd = new SGD(params);
  const cases: [string, string, string | null, (o: never) => unknown][] = [
    ['crossEntropy options', 'label_smoothing', 'labelSmoothing', (o) => crossEntropy(logits, targets, o)],
    ['crossEntropy options', 'ignore_index', 'ignoreIndex', (o) => crossEntropy(logits, targets, o)],
    ['crossEntropy options', 'reduction', null, (o) => crossEntropy(logits, targets, o)],
    ['mse options', 'masks', 'mask', (o) => mse(logits, logits, o)],
    ['mse options', 'reduction', null, (o) => mse(logits, logits, o)],
    ['AdamW options', 'weight_decay', 'weightDecay', (o) => new AdamW(params, o)],
    ['AdamW options', 'beta1', 'betas', (o) => new AdamW(params, o)],
    ['AdamW options', 'amsgrad', null, (o) => new AdamW(params, o)],
    // Other libraries' names for the same options (Keras, Hugging Face, optax).
    ['AdamW options', 'learningRate', 'lr', (o) => new AdamW(params, o)],
    ['AdamW options', 'learning_rate', 'lr', (o) => new AdamW(params, o)],
    ['AdamW options', 'epsilon', 'eps', (o) => new AdamW(params, o)],
    ['AdamW options', 'weightdecay', 'weightDecay', (o) => new AdamW(params, o)],
    ['SGD options', 'learningRate', 'lr', (o) => new SGD(params, o)],
    ['SGD options', 'nesterow', 'nesterov', (o) => new SGD(params, o)],
    ['SGD options', 'momentun', 'momentum', (o) => new SGD(params, o)],
    ['SGD options', 'betas', null, (o) => new SGD(params, o)],
    ['trainStep options', 'maxGradNrom', 'maxGradNorm', (o) => trainStep(model, sgd, fl([2, 3]), targets, o)],
    ['trainStep options', 'lossFn', 'loss', (o) => trainStepAsync(model, sgd, fl([2, 3]), targets, o)],
    ['trainStep options', 'epochs', null, (o) => trainStep(model, sgd, fl([2, 3]), targets, o)],
    ['cosineWithWarmup options', 'warmup_steps', 'warmupSteps', (o) => cosineWithWarmup({ lr: 1, warmupSteps: 1, totalSteps: 5, ...(o as object) })],
    ['cosineWithWarmup options', 'min_lr', 'minLr', (o) => cosineWithWarmup({ lr: 1, warmupSteps: 1, totalSteps: 5, ...(o as object) })],
    ['inverseSqrtWarmup options', 'dmodel', 'dModel', (o) => inverseSqrtWarmup({ dModel: 8, warmupSteps: 1, ...(o as object) })],
    ['inverseSqrtWarmup options', 'warmup', 'warmupSteps', (o) => inverseSqrtWarmup({ dModel: 8, warmupSteps: 1, ...(o as object) })],
  ];
  for (const [where, key, meant, call] of cases)
    c.add(`${where}: { ${key} }`, 'ERR_NF_INVALID_ARG', unknown(key, where, meant), () => call({ [key]: 1 } as never));

  const state = adamw.stateDict();
  c.add('adamw.loadStateDict({ ..., version })', 'ERR_NF_INVALID_ARG', unknown('version', 'AdamW.loadStateDict state', null),
    () => adamw.loadStateDict({ ...state, version: 2 } as never));
  c.add('adamw.loadStateDict({ options: { learningRate } })', 'ERR_NF_INVALID_ARG', unknown('learningRate', 'AdamW state.options', 'lr'),
    () => adamw.loadStateDict({ ...state, options: { learningRate: 1 } }));
  c.add('adamw.loadStateDict({ options: { weightdecay } })', 'ERR_NF_INVALID_ARG', unknown('weightdecay', 'AdamW state.options', 'weightDecay'),
    () => adamw.loadStateDict({ ...state, options: { weightdecay: 1 } }));
  c.add('adamw.loadStateDict({ state: [{ steps }] })', 'ERR_NF_INVALID_ARG', unknown('steps', 'state.state[0]', 'step'),
    () => adamw.loadStateDict({ ...state, state: state.state.map((e) => ({ ...e, steps: 1 })) }));
  c.add("sgd.loadStateDict(an AdamW state)", 'ERR_NF_INVALID_ARG', /Expected 'SGD' for state\.type but received string "AdamW"/,
    () => sgd.loadStateDict(state));
  c.add('scheduleFromConfig({ kind, options, warmup })', 'ERR_NF_INVALID_ARG', unknown('warmup', 'schedule config', null),
    () => scheduleFromConfig({ kind: 'cosineWithWarmup', options: { lr: 1, warmupSteps: 1, totalSteps: 5 }, warmup: 1 } as never));
  c.add('scheduleFromConfig({ kind, option })', 'ERR_NF_INVALID_ARG', unknown('option', 'schedule config', 'options'),
    () => scheduleFromConfig({ kind: 'inverseSqrtWarmup', option: {} } as never));

  const file = path.join(os.tmpdir(), `nf-bad-unknown-${process.pid}.safetensors`);
  c.add('saveCheckpoint(path, { model, step, scheduler })', 'ERR_NF_INVALID_ARG', unknown('scheduler', 'saveCheckpoint state', 'schedule'),
    () => saveCheckpoint(file, { model, step: 1, scheduler: cosineWithWarmup({ lr: 1, warmupSteps: 1, totalSteps: 5 }) } as never));
  c.add('saveCheckpointAsync(path, { model, step, epoch })', 'ERR_NF_INVALID_ARG', unknown('epoch', 'saveCheckpoint state', null),
    () => saveCheckpointAsync(file, { model, step: 1, epoch: 1 } as never));
  c.add('resume(path, { model, optimiser })', 'ERR_NF_INVALID_ARG', unknown('optimiser', 'resume target', 'optimizer'),
    () => resume(file, { model, optimiser: adamw } as never));
  c.add('resumeAsync(path, { model, scheduler })', 'ERR_NF_INVALID_ARG', unknown('scheduler', 'resume target', null),
    () => resumeAsync(file, { model, scheduler: 1 } as never));
}

export function unknownKeyCases(): Catalogue {
  const c = new Catalogue('unknown keys');
  configCases(c);
  forwardCases(c);
  trainingCases(c);
  return c;
}
