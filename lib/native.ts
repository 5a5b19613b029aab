/**
 * Loads the compiled addon and declares its raw interface, so the façade is type-checked against
 * what the addon exports. Resolution: NF_ADDON_PATH (an explicit .node file) if set, else
 * node-gyp-build, which tries prebuilds/ and then build/Release of the package root.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

import type { CoreOps } from './native/core';
import type { LayerNormOps } from './native/layernorm';
import type { LinearOps } from './native/linear';

/** The raw binding: every op takes one options object of typed arrays and dims (see native/napi). */
export type NativeBinding = CoreOps & LayerNormOps & LinearOps;

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
