/**
 * The README's quick example ("Train a ViT in a dozen lines") as a CommonJS script that runs as
 * written, with the `nextBatch()` it leaves to the reader defined (seeded random 28×28 digits) and
 * its 2000 steps cut to 3, then prints the trained model's logits on a fixed batch as JSON
 * (`{"logits": [...]}`, the last line). test/runtimes.test.ts and test/platform_musl.test.ts run it.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

import { repoRoot } from './bundle';

const readme = fs.readFileSync(path.join(repoRoot, 'README.md'), 'utf8');
const snippet = /## Train a ViT in a dozen lines\s+```js\n([\s\S]*?)```/.exec(readme)![1];

export const quickExample = `// nextBatch(), which the README leaves to the reader: 8 seeded random 28x28 images and labels.
let seed = 7;
const rand = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
const nextBatch = () => ({ images: Float32Array.from({ length: 8 * 784 }, rand), labels: Int32Array.from({ length: 8 }, () => Math.floor(rand() * 10)) });
${snippet.replace('step <= 2000', 'step <= 3')}
const check = nextBatch();
const out = model.forward(Tensor.from(check.images, [8, 1, 28, 28]));
console.log(JSON.stringify({ logits: Array.from(out.toArray()) }));
`;
