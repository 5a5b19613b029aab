/**
 * Worker threads and child processes cannot load the TypeScript sources that vitest runs, so
 * tests that need them bundle an entry file (with the library it imports) into one CommonJS file
 * with esbuild, and point it at the addon through NF_ADDON_PATH (a bundle in a temporary folder
 * cannot find the package root on its own).
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { buildSync } from 'esbuild';

import { nativeAddonPath } from '../../lib/native/addon';

export const repoRoot = path.resolve(__dirname, '..', '..');

/** Bundles `entry` (a path relative to the repository root) to a .js file in a temporary folder; returns its path. */
export function bundle(entry: string): string {
  const outfile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'nf-bundle-')), `${path.basename(entry, '.ts')}.js`);
  buildSync({ entryPoints: [path.join(repoRoot, entry)], bundle: true, platform: 'node', format: 'cjs', target: 'node20',
    outfile, logLevel: 'error' });
  return outfile;
}

/** The environment for a bundle: this process's, with NF_ADDON_PATH set to the addon the tests use. */
export function bundleEnv(): NodeJS.ProcessEnv {
  return { ...process.env, NF_ADDON_PATH: process.env.NF_ADDON_PATH ?? nativeAddonPath };
}
