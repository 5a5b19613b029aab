/**
 * Loads the compiled addon and declares its raw interface, so the façade is type-checked against
 * what the addon exports. Resolution: NF_ADDON_PATH (an explicit .node file) if set, else
 * node-gyp-build, which tries prebuilds/ and then build/Release of the package root.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

import type { CoreOps } from './native/core';
import type { AttentionOps } from './native/attention';
import type { ElementwiseOps } from './native/elementwise';
import type { EmbeddingOps } from './native/embedding';
import type { FeedForwardOps } from './native/feedforward';
import type { LayerNormOps } from './native/layernorm';
import type { LinearOps } from './native/linear';
import type { LossOps } from './native/loss';
import type { OptimOps } from './native/optim';
import type { PatchEmbedOps } from './native/patch_embed';
import type { PeakOps } from './native/peak';

/**
 * Every op `name` also exists as `nameAsync`: the same validation on the calling thread, the work
 * on a worker thread, a Promise that settles when it is done (the arrays must stay untouched
 * until then).
 */
export type WithAsync<T> = T & {
  [K in keyof T as `${string & K}Async`]: T[K] extends (a: infer A) => void ? (a: A) => Promise<void> : never;
};

/** The raw binding: every op takes one options object of typed arrays and dims (see native/napi). */
export type NativeBinding = CoreOps &
  WithAsync<LayerNormOps & LinearOps & AttentionOps & FeedForwardOps & PatchEmbedOps & EmbeddingOps & ElementwiseOps & LossOps & OptimOps & PeakOps>;

function packageRoot(start: string): string {
  let dir = start;
  for (;;) {
    const pkg = path.join(dir, 'package.json');
    if (fs.existsSync(pkg) && JSON.parse(fs.readFileSync(pkg, 'utf8')).name === 'nodeformer') return dir;
    const up = path.dirname(dir);
    if (up === dir) throw new Error(`nodeformer: cannot find the package root above ${start}`);
    dir = up;
  }
}

function load(): NativeBinding {
  const explicit = process.env.NF_ADDON_PATH;
  if (explicit) return require(path.resolve(explicit)) as NativeBinding;
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const nodeGypBuild = require('node-gyp-build') as (dir: string) => unknown;
  return nodeGypBuild(packageRoot(__dirname)) as NativeBinding;
}

/** The loaded addon. */
export const native: NativeBinding = load();
