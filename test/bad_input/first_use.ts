/**
 * Mistakes a new user makes on a first try, each a NodeformerError naming the user's argument
 * rather than an internal op or a dependency: a target past the classes of crossEntropy, a batch
 * (or sequence, or memory) of zero for every model, loadModel on files whose metadata names no
 * class or an unknown one, a file that is no PNG (or a truncated PNG) given as a digit picture,
 * and a PNG given where a safetensors checkpoint belongs.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { PNG } from 'pngjs';

import { digitPixels } from '../../lib/cli/images';
import {
  crossEntropy, Decoder, DecoderBlock, Encoder, EncoderBlock, loadCheckpoint, loadModel, loadSafetensors, MultiHeadAttention,
  PatchEmbedding, saveSafetensors, Tensor, Transformer, ViTClassifier, ViTDecoder, ViTEncoder,
} from '../../lib';
import { Catalogue } from './case';

const D = 8, H = 2, F = 16;
const fl = (shape: number[]) => Tensor.zeros(shape);
const ints = (shape: number[]) => Tensor.zeros(shape, 'int32');
const vitCfg = { imgSize: 8, patchSize: 4, inChannels: 1, dModel: D, numHeads: H, dFF: F, depth: 1 };
const seqCfg = { dModel: D, numHeads: H, dFF: F, depth: 1 };
/** "Expected <what> of at least 1 for <name> but received ...". */
const atLeastOne = (what: string, name: string) => new RegExp(`Expected ${what} of at least 1 for ${name.replace('.', '\\.')} but received`);

function crossEntropyCases(c: Catalogue): void {
  const targets = (v: number[], shape = [v.length]) => Tensor.from(Int32Array.from(v), shape);
  c.add('crossEntropy(a target of 7 for 3 classes)', 'ERR_NF_INVALID_ARG',
    /Expected class indices in \[0, 3\) \(the logits have 3 classes\) or ignoreIndex \(-100\) for targets but received target 7 at row 0/,
    () => crossEntropy(fl([1, 3]), targets([7])));
  c.add('crossEntropy(targets [2, 2] with 5 at [1, 0])', 'ERR_NF_INVALID_ARG', /for targets but received target 5 at \[1, 0\]/,
    () => crossEntropy(fl([2, 2, 3]), targets([0, 1, 5, 2], [2, 2])));
  c.add('crossEntropy(a target of -1 with ignoreIndex 0)', 'ERR_NF_INVALID_ARG', /ignoreIndex \(0\) for targets but received target -1 at row 1/,
    () => crossEntropy(fl([2, 3]), targets([0, -1]), { ignoreIndex: 0 }));
}

function emptyCases(c: Catalogue): void {
  const vit = new ViTClassifier(vitCfg), enc = new ViTEncoder(vitCfg), dec = new ViTDecoder(vitCfg);
  const encoder = new Encoder({ ...seqCfg, vocabSize: 5, maxLen: 6 }), decoder = new Decoder({ ...seqCfg, vocabSize: 5, maxLen: 6 });
  const tr = new Transformer({ ...seqCfg, srcVocab: 5, tgtVocab: 5, maxLen: 6 });
  const mha = new MultiHeadAttention({ dModel: D, numHeads: H });
  const eb = new EncoderBlock({ dModel: D, numHeads: H, dFF: F }), db = new DecoderBlock({ dModel: D, numHeads: H, dFF: F });
  const pe = new PatchEmbedding({ imgSize: 8, patchSize: 4, inChannels: 1, dModel: D });
  const cases: [string, string, string, () => unknown][] = [
    ['ViTClassifier.forward(a batch of 0 images)', 'a batch', 'images', () => vit.forward(fl([0, 1, 8, 8]))],
    ['ViTClassifier.forwardAsync(a batch of 0 images)', 'a batch', 'images', () => vit.forwardAsync(fl([0, 1, 8, 8]))],
    ['ViTClassifier.attentionMaps(a batch of 0 images)', 'a batch', 'images', () => vit.attentionMaps(fl([0, 1, 8, 8]))],
    ['ViTEncoder.forward(a batch of 0 images)', 'a batch', 'images', () => enc.forward(fl([0, 1, 8, 8]))],
    ['ViTDecoder.forward(a batch of 0)', 'a batch', 'memory', () => dec.forward(fl([0, 5, D]))],
    ['ViTDecoder.forward(memory of 0 positions)', 'a memory length', 'memory', () => dec.forward(fl([2, 0, D]))],
    ['Encoder.forward(a batch of 0 sequences)', 'a batch', 'tokens', () => encoder.forward(ints([0, 3]))],
    ['Decoder.forward(a batch of 0 sequences)', 'a batch', 'tokens', () => decoder.forward(ints([0, 3]), fl([0, 3, D]))],
    ['Decoder.forward(memory of 0 positions)', 'a memory length', 'memory', () => decoder.forward(ints([2, 3]), fl([2, 0, D]))],
    ['Transformer.forward(a batch of 0)', 'a batch', 'src', () => tr.forward(ints([0, 3]), ints([0, 3]))],
    ['Transformer.generate(a batch of 0)', 'a batch', 'src', () => tr.generate(ints([0, 3]))],
    ['MultiHeadAttention.forward(a batch of 0)', 'a batch', 'x', () => mha.forward(fl([0, 3, D]))],
    ['MultiHeadAttention.forward(0 positions)', 'a sequence length', 'x', () => mha.forward(fl([2, 0, D]))],
    ['MultiHeadAttention.forward(memory of 0 positions)', 'a memory length', 'options.memory', () => mha.forward(fl([2, 3, D]), { memory: fl([2, 0, D]) })],
    ['EncoderBlock.forward(a batch of 0)', 'a batch', 'x', () => eb.forward(fl([0, 3, D]))],
    ['EncoderBlock.forward(0 positions)', 'a sequence length', 'x', () => eb.forward(fl([2, 0, D]))],
    ['DecoderBlock.forward(a batch of 0)', 'a batch', 'x', () => db.forward(fl([0, 3, D]), fl([0, 3, D]))],
    ['DecoderBlock.forward(memory of 0 positions)', 'a memory length', 'memory', () => db.forward(fl([2, 3, D]), fl([2, 0, D]))],
    ['PatchEmbedding.forward(images of height 0)', 'a height', 'images', () => pe.forward(fl([1, 1, 0, 8]))],
    ['PatchEmbedding.forward(images of width 0)', 'a width', 'images', () => pe.forward(fl([1, 1, 8, 0]))],
  ];
  for (const [title, what, name, run] of cases) c.add(title, 'ERR_NF_INVALID_ARG', atLeastOne(what, name), run);
}

function fileCases(c: Catalogue): void {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nf-bad-first-'));
  const file = (name: string, bytes: Uint8Array) => (fs.writeFileSync(path.join(dir, name), bytes), path.join(dir, name));
  const png = new PNG({ width: 6, height: 6 });
  png.data.fill(255);
  const pngBytes = PNG.sync.write(png);
  const digit = file('digit.png', pngBytes);
  const weights = path.join(dir, 'weights.safetensors');
  saveSafetensors(weights, { w: fl([2]) });

  // loadModel without a class: the file's metadata names it, or the error says what is missing.
  c.add('loadModel(a file without "module" metadata)', 'ERR_NF_FORMAT', /weights\.safetensors but received a safetensors file without "module" and "config" metadata \(a bare state dict\): .*model\.loadStateDict\(loadSafetensors\(path\)\)/,
    () => loadModel(weights));
  const other = path.join(dir, 'other.safetensors');
  saveSafetensors(other, { w: fl([2]) }, { module: 'MyNet', config: '{}' });
  c.add('loadModel(a file of an unknown class)', 'ERR_NF_FORMAT', /received a checkpoint of the unknown class "MyNet" \(nodeformer's classes are .*ViTClassifier.*loadModel\(path, MyNet\)/,
    () => loadModel(other));
  c.add('loadModel(path, a class that is not a Module)', 'ERR_NF_INVALID_ARG', /for cls but received/, () => loadModel(weights, Date as never));

  // A PNG where a safetensors file belongs.
  const notSafetensors = /digit\.png is not a safetensors file \(it is a PNG image; .*header length would be \d+/;
  c.add('loadModel(a PNG)', 'ERR_NF_FORMAT', notSafetensors, () => loadModel(digit));
  c.add('ViTClassifier.load(a PNG)', 'ERR_NF_FORMAT', notSafetensors, () => ViTClassifier.load(digit));
  c.add('loadSafetensors(a PNG)', 'ERR_NF_FORMAT', notSafetensors, () => loadSafetensors(digit));
  c.add('loadCheckpoint(a PNG)', 'ERR_NF_FORMAT', notSafetensors, () => loadCheckpoint(digit));
  const text = file('notes.txt', Buffer.from('these are not weights, just some notes'));
  c.add('loadSafetensors(a text file)', 'ERR_NF_FORMAT', /notes\.txt is not a safetensors file \(it starts with the bytes 74 68 65 73/,
    () => loadSafetensors(text));

  // What is not a PNG, given as a digit picture (nodeformer predict and the example server call digitPixels).
  const weightBytes = fs.readFileSync(weights);
  c.add('digitPixels(a safetensors file)', 'ERR_NF_FORMAT', /Expected a PNG image for weights\.safetensors but received \d+ bytes that are not a PNG file/,
    () => digitPixels(weightBytes, 28, 'weights.safetensors'));
  c.add('digitPixels(an empty file)', 'ERR_NF_FORMAT', /for empty\.png but received 0 bytes that are not a PNG file \(they start with nothing/,
    () => digitPixels(new Uint8Array(0), 28, 'empty.png'));
  c.add('digitPixels(a truncated PNG)', 'ERR_NF_FORMAT', /Expected a PNG image for cut\.png but it cannot be decoded: the file is truncated/,
    () => digitPixels(pngBytes.subarray(0, 40), 28, 'cut.png'));
  const corrupt = Buffer.from(pngBytes);
  corrupt[corrupt.length - 20] ^= 0xff;
  c.add('digitPixels(a PNG with a corrupt chunk)', 'ERR_NF_FORMAT', /for bad\.png but it cannot be decoded/, () => digitPixels(corrupt, 28, 'bad.png'));
}

export function firstUseCases(): Catalogue {
  const c = new Catalogue('first use');
  crossEntropyCases(c);
  emptyCases(c);
  fileCases(c);
  return c;
}
