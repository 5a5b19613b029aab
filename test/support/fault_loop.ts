/**
 * A steady training loop that counts minor page faults, for test/tensor_memory.test.ts, run as a
 * child process (bundled) so the count is this loop's alone. Prints one JSON line: the malloc
 * policy in force and the faults per step after five warm-up steps.
 */
import { AdamW, native, Tensor, trainStep, ViTClassifier } from '../../lib';

const model = new ViTClassifier({ imgSize: 32, patchSize: 4, inChannels: 3, numClasses: 10, dModel: 64, numHeads: 4, dFF: 256, depth: 2 });
const opt = new AdamW(model.parameters());
const B = 16;
const x = Tensor.from(Float32Array.from({ length: B * 3 * 1024 }, Math.sin), [B, 3, 32, 32]);
const y = Tensor.from(Int32Array.from({ length: B }, (_, i) => i % 10), [B]);
for (let i = 0; i < 5; i++) trainStep(model, opt, x, y);
const before = process.resourceUsage().minorPageFault;
for (let i = 0; i < 10; i++) trainStep(model, opt, x, y);
console.log(JSON.stringify({ policy: native.mallocPolicy(), faults: (process.resourceUsage().minorPageFault - before) / 10 }));
