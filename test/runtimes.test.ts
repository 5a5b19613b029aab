/**
 * The README's quick example ("Train a ViT in a dozen lines") under every JavaScript runtime
 * present: this Node, Node 22 and 24, Bun and Deno (scripts/install_runtimes.sh installs them into
 * a cache folder; .ci/run runs it; each one missing is skipped with the reason printed). The
 * snippet runs as written, with the `nextBatch()` it leaves to the reader defined (seeded random
 * 28×28 digits) and its 2000 steps cut to 3; then the trained model's logits on a fixed batch are
 * printed. A second script runs the Promise forms (forwardAsync, trainStepAsync: ops on the
 * addon's worker threads) and loads the library in a worker_threads Worker. Every runtime must
 * print what this Node prints (the same addon, the same arithmetic), to float32 rounding.
 *
 * The library is this clone's: a project folder whose node_modules/nodeformer links to the
 * repository (dist/, built by scripts/ensure-built.js, and the addon in build/Release), resolved as
 * each runtime resolves packages (Deno: the node_modules folder beside a package.json).
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { runtime, type RuntimeName } from './support/runtimes';

const root = path.resolve(__dirname, '..');
const app = fs.mkdtempSync(path.join(os.tmpdir(), 'nf-runtimes-'));
afterAll(() => fs.rmSync(app, { recursive: true, force: true }));

const readme = fs.readFileSync(path.join(root, 'README.md'), 'utf8');
const snippet = /## Train a ViT in a dozen lines\s+```js\n([\s\S]*?)```/.exec(readme)![1];

const quick = `// nextBatch(), which the README leaves to the reader: 8 seeded random 28x28 images and labels.
let seed = 7;
const rand = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
const nextBatch = () => ({ images: Float32Array.from({ length: 8 * 784 }, rand), labels: Int32Array.from({ length: 8 }, () => Math.floor(rand() * 10)) });
${snippet.replace('step <= 2000', 'step <= 3')}
const check = nextBatch();
const out = model.forward(Tensor.from(check.images, [8, 1, 28, 28]));
console.log(JSON.stringify({ logits: Array.from(out.toArray()) }));
`;

const asyncAndWorkers = `const { Worker, isMainThread, parentPort } = require('node:worker_threads');
const nf = require('nodeformer');
const lin = () => new nf.Linear({ inFeatures: 5, outFeatures: 3, seed: 3 });
const x = () => nf.Tensor.from(Float32Array.from({ length: 10 }, (_, i) => Math.sin(i)), [2, 5]);
if (!isMainThread) {
  parentPort.postMessage(Array.from(lin().forward(x()).toArray()));
} else {
  (async () => {
    const sync = Array.from(lin().forward(x()).toArray());
    const asyncOut = Array.from((await lin().forwardAsync(x())).toArray());
    const model = new nf.ViTClassifier({ imgSize: 8, patchSize: 4, inChannels: 1, numClasses: 3, dModel: 16, numHeads: 2, dFF: 32, depth: 1, seed: 2 });
    const opt = new nf.AdamW(model.parameters(), { lr: 1e-2 });
    const images = nf.Tensor.from(Float32Array.from({ length: 2 * 64 }, (_, i) => Math.cos(i)), [2, 1, 8, 8]);
    const labels = nf.Tensor.from(Int32Array.of(0, 2), [2]);
    const losses = [];
    for (let i = 0; i < 3; i++) losses.push(await nf.trainStepAsync(model, opt, images, labels));
    const fromWorker = await new Promise((resolve, reject) => {
      const w = new Worker(__filename);
      w.once('message', resolve);
      w.once('error', reject);
    });
    console.log(JSON.stringify({ sync, asyncOut, fromWorker, losses }));
  })().catch((e) => { console.error(e); process.exit(1); });
}
`;

/** How each runtime runs a CommonJS file. */
const commands: Record<'node20' | Exclude<RuntimeName, 'pnpm' | 'nodeWin32'>, (file: string) => [string, string[]] | null> = {
  node20: (file) => [process.execPath, [file]],
  node22: (file) => (runtime('node22') ? [runtime('node22')!, [file]] : null),
  node24: (file) => (runtime('node24') ? [runtime('node24')!, [file]] : null),
  bun: (file) => (runtime('bun') ? [runtime('bun')!, [file]] : null),
  deno: (file) => (runtime('deno') ? [runtime('deno')!, ['run', '--allow-all', '--quiet', file]] : null),
};

function runIn(name: keyof typeof commands, file: string): Record<string, number[]> {
  const [cmd, args] = commands[name](path.join(app, file))!;
  const out = execFileSync(cmd, args, { cwd: app, encoding: 'utf8', env: { ...process.env, DENO_NO_UPDATE_CHECK: '1' }, timeout: 120_000 });
  return JSON.parse(out.trim().split('\n').at(-1)!) as Record<string, number[]>;
}

function close(a: number[], b: number[]): void {
  expect(a.length).toBe(b.length);
  const scale = Math.max(1, ...b.map(Math.abs));
  a.forEach((v, i) => expect(Math.abs(v - b[i])).toBeLessThanOrEqual(1e-5 * scale));
}

describe("the README's quick example, async ops and worker threads under each runtime", () => {
  let reference: { quick: Record<string, number[]>; workers: Record<string, number[]> };

  beforeAll(() => {
    execFileSync(process.execPath, [path.join(root, 'scripts', 'ensure-built.js')], { cwd: root, stdio: 'inherit' });
    fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'nf-runtimes', private: true, type: 'commonjs' }));
    fs.mkdirSync(path.join(app, 'node_modules'));
    fs.symlinkSync(root, path.join(app, 'node_modules', 'nodeformer'), 'dir');
    fs.writeFileSync(path.join(app, 'quick.cjs'), quick);
    fs.writeFileSync(path.join(app, 'workers.cjs'), asyncAndWorkers);
    reference = { quick: runIn('node20', 'quick.cjs'), workers: runIn('node20', 'workers.cjs') };
  }, 600_000);

  it('runs under this Node: finite logits, async = sync = worker, the loss falls', () => {
    expect(reference.quick.logits).toHaveLength(80);
    expect(reference.quick.logits.every(Number.isFinite)).toBe(true);
    const { sync, asyncOut, fromWorker, losses } = reference.workers;
    expect(asyncOut).toEqual(sync);
    expect(fromWorker).toEqual(sync);
    expect(losses[2]).toBeLessThan(losses[0]);
  });

  for (const name of ['node22', 'node24', 'bun', 'deno'] as const) {
    it.runIf(commands[name]('x'))(`runs under ${name}, computing what Node 20 computes`, () => {
      const version = execFileSync(commands[name]('x')![0], ['--version'], { encoding: 'utf8' }).split('\n')[0];
      const quickOut = runIn(name, 'quick.cjs');
      close(quickOut.logits, reference.quick.logits);
      const w = runIn(name, 'workers.cjs');
      for (const k of ['sync', 'asyncOut', 'fromWorker', 'losses']) close(w[k], reference.workers[k]);
      console.log(`${name} (${version.trim()}): quick example, forwardAsync, trainStepAsync and a Worker agree with Node ${process.versions.node}`);
    }, 300_000);
  }
});
