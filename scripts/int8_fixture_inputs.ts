/**
 * The inputs scripts/int8_ort_fixtures.py runs onnxruntime on, written by the library itself so that
 * both sides see the same numbers: MNIST's test split of the demo (lib/cli/mnist.ts loadMnist, 2000
 * digits, normalised as `nodeformer eval` feeds them) as `images` [2000, 1, 28, 28] float32 and
 * `labels` [2000] int32.
 *   tsx scripts/int8_fixture_inputs.ts OUT.safetensors
 */
import { imageBatch, loadMnist } from '../lib/cli/mnist';
import { Tensor } from '../lib/core/tensor';
import { saveSafetensors } from '../lib/io/safetensors';

const out = process.argv[2];
if (!out) throw new Error('usage: tsx scripts/int8_fixture_inputs.ts OUT.safetensors');
const { test } = loadMnist();
const images = imageBatch(test, Int32Array.from({ length: test.count }, (_, i) => i));
saveSafetensors(out, { images, labels: Tensor.from(Int32Array.from(test.labels), [test.count]) });
